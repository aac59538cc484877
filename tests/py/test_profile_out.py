"""The commands after `opskew profile -o OUT` take what it wrote: `summary
OUT`, `compare OUT1 OUT2`, `summary TRACE --corrected --from OUT` and
`correct TRACE --from OUT` (docs/profile.md, "After the run")."""

import json
import shutil
import sys

import pytest

from conftest import one_line_error, run_opskew
from opskew.render.notes import all_words
from test_profile_cli import SMALL, script

pytest.importorskip("torch")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two folders `opskew profile` wrote for the same small training loop."""
    d = tmp_path_factory.mktemp("profile_out")
    outs = []
    for name in ("out1", "out2"):
        out = d / name
        p = run_opskew("profile", "-o", str(out), *SMALL, "--", sys.executable, script(d), "40")
        assert p.returncode == 0, p.stderr
        outs.append(out)
    return outs


def _report(out):
    return json.loads((out / "report.json").read_text())


def test_summary_of_a_profile_folder_is_the_run(runs, tmp_path):
    out = runs[0]
    rep = _report(out)
    p = run_opskew("summary", str(out), "--json", str(tmp_path / "s.json"))
    assert p.returncode == 0, p.stderr
    doc = json.loads((tmp_path / "s.json").read_text())
    assert doc["schema"] == "opskew.profile_summary/1"
    assert [c["cycle"] for c in doc["cycles"]] == [r["cycle"] for r in rep["reports"]]
    assert doc["run"]["w_ns"]["median"] == rep["final"]["w_ns"]["median"]
    assert doc["run"]["corrected_step_ns"] == rep["final"]["corrected_step_ns"]
    assert doc["cycles"][-1]["raw_trace"] == rep["reports"][-1]["raw_trace"]
    assert doc["cycles"][-1]["corrected_step_ns"] == rep["reports"][-1]["corrected_step_ns"]
    assert {o["name"] for o in doc["ops"]} == {o["name"] for o in rep["report"]["operators"]["ops"]}
    # The text: the run's W, each cycle with its traces, the operators.
    assert "per operator event (the run's final W" in p.stdout
    assert "traces/opskew-profile-cycle2.pt.trace.json" in p.stdout
    assert "traces/corrected/opskew-profile-cycle2.corrected.pt.trace.json" in p.stdout
    assert "aten::addmm" in p.stdout and "corrected self [95% CI]" in p.stdout
    # report.json itself reads the same; --corrected gives the latest cycle's key_averages() table.
    q = run_opskew("summary", str(out / "report.json"), "--json", "-")
    assert q.returncode == 0 and json.loads(q.stdout)["cycles"] == doc["cycles"]
    c = run_opskew("summary", str(out), "--corrected", "--top", "3")
    assert c.returncode == 0, c.stderr
    assert "Self CPU CI" in c.stdout and f"opskew.profile cycle {rep['report']['cycle']}" in c.stdout
    one_line_error(run_opskew("summary", str(out), "--cat", "cpu_op"), "--cat is not taken with an opskew profile")


def test_compare_two_profile_runs(runs, tmp_path):
    a, b = runs
    p = run_opskew("compare", str(a / "report.json"), str(b), "--json", str(tmp_path / "c.json"))
    assert p.returncode == 0, p.stderr
    doc = json.loads((tmp_path / "c.json").read_text())
    assert doc["kind"] == "profile"
    rows = {r["name"]: r for r in doc["rows"]}
    step = rows["corrected step"]
    fa, fb = _report(a)["final"], _report(b)["final"]
    assert step["values"] == [fa["corrected_step_ns"], fb["corrected_step_ns"]]
    for ci, f in zip(step["ci95"], (fa, fb)):
        assert ci is None or ci == f["corrected_step_w_ci_ns"]
    if None not in step["ci95"]:
        lo = step["ci95"]
        assert step["changes"][0]["significant"] == (lo[0][1] < lo[1][0] or lo[1][1] < lo[0][0])
    assert rows["W per event"]["values"] == [fa["w_ns"]["median"], fb["w_ns"]["median"]]
    ops = {o["name"]: o for o in _report(a)["report"]["operators"]["ops"]}
    r = rows["corrected self: aten::addmm"]
    assert r["values"][0] == ops["aten::addmm"]["corrected_self_ns"]["median"]
    assert r["operator"] == "aten::addmm" and r["changes"][0]["significant"] is None
    assert not any(n.startswith("corrected self: ProfilerStep#") for n in rows)
    assert "beyond both" in doc["significance"]
    assert "corrected step" in p.stdout


def test_from_out_takes_the_w_the_run_measured(runs, tmp_path):
    out = runs[0]
    rep = _report(out)
    cyc = rep["reports"][-1]
    w = max((cyc.get("corrected_w_ns") or cyc["w_ns"])["median"], 0.0)  # below 0: taken at 0, as the run did
    raw = cyc["raw_trace"]
    env = {"OPSKEW_CACHE_DIR": str(tmp_path / "cache")}  # nothing stored
    p = run_opskew("correct", raw, "--from", str(out), "--json", "-", env=env)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["calibration"]["w_ns"] == pytest.approx(w)
    assert f"cycle {cyc['cycle']}'s trace" in doc["calibration"]["source"]
    s = run_opskew("summary", raw, "--corrected", "--from", str(out / "report.json"), "--json", "-", env=env)
    assert s.returncode == 0, s.stderr
    d = json.loads(s.stdout)
    assert d["w_ns"]["median"] == pytest.approx(w) and f"cycle {cyc['cycle']}'s trace" in d["source"]
    # A trace the run did not write: the run's final W, and it says so.
    other = tmp_path / "other.json"
    shutil.copy(raw, other)
    s = run_opskew("summary", str(other), "--corrected", "--from", str(out), "--json", "-", env=env)
    d = json.loads(s.stdout)
    assert d["w_ns"]["median"] == pytest.approx(max(rep["final"]["w_ns"]["median"], 0.0))
    assert "the run's final W" in d["source"]
    # Nothing stored, nothing given and none to measure (--no-calibrate): the
    # line names every way to give W.
    for cmd in (("correct", raw, "--no-calibrate"), ("summary", raw, "--corrected", "--no-calibrate")):
        line = one_line_error(run_opskew(*cmd, env=env), "no stored calibration")
        assert "--w" in line and "--from OUT" in line and "opskew calibrate" in line


def test_str_of_every_result_is_its_printed_text(runs, tmp_path):
    """str(results.load("report.json")) dumped JSON; docs/api.md says str is the text."""
    from opskew import results

    out = runs[0]
    r = results.load(out / "report.json")
    text = str(r)
    assert text.startswith("opskew profile run") and not text.lstrip().startswith("{")
    assert run_opskew("summary", str(out)).stdout.rstrip("\n") == text
    assert "per operator event (the run's final W" in str(r.final)
    assert str(r.report).startswith(f"opskew.profile cycle {r.report.cycle}")
    # Scalars are scalars, the interval apart; the JSON keeps its dicts.
    assert r.report.w_ns == r.report["w_ns"]["median"] and r.report.w_ci95_ns == r.report["w_ns"]["ci95"]
    assert r.final.w_ns == r.to_dict()["final"]["w_ns"]["median"]
    js = tmp_path / "c.json"
    assert run_opskew("correct", r.report.raw_trace, "--from", str(out), "--json", str(js)).returncode == 0
    c = results.load(js)
    assert str(c).startswith("opskew correct: ") and "(opskew profile " in str(c)
    s = opskew_summary(out)
    assert str(s) == text and s.schema == "opskew.profile_summary/1" and s.rows()


def opskew_summary(path):
    import opskew

    return opskew.summary(str(path))


def test_a_refused_run_leaves_no_folder_it_created(tmp_path):
    """Refused with exit 2 after OUT was made (no torch in the profiled
    interpreter: -S leaves the venv's packages out), OUT went with it; a
    folder that was there before stays."""
    train = script(tmp_path)
    for out, existed in ((tmp_path / "new" , False), (tmp_path / "mine", True)):
        if existed:
            out.mkdir()
        p = run_opskew("profile", "-o", str(out), *SMALL, "--", sys.executable, "-S", train, "3")
        one_line_error(p, "cannot import torch in the profiled interpreter")
        assert out.exists() == existed


def test_a_report_that_does_not_read_is_named(tmp_path):
    """A profile folder whose report.json is cut short is said to be that,
    not taken for a folder of traces (summary, compare, --from)."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.json").write_text('{"schema": "opskew.profile/1", "reports": [')
    for args in (["summary", str(out)], ["compare", str(out), str(out)],
                 ["summary", "--corrected", str(out / "t.json"), "--from", str(out)]):
        one_line_error(run_opskew(*args), "an `opskew profile` report that does not read as JSON")


def test_from_out_takes_a_w_below_zero_at_zero_as_the_run_did(runs, tmp_path):
    """A run whose paired wait steps ran slower than its profiled steps
    measures W below 0; its own correction took it at 0, and `correct --from`
    takes it so too, with a note, instead of refusing (it failed a CI run)."""
    out = tmp_path / "neg"
    shutil.copytree(runs[0], out)
    doc = _report(out)
    cyc = doc["reports"][-1]
    for w in (cyc.get("corrected_w_ns"), cyc.get("w_ns")):
        if w:
            w["median"], w["ci95"] = -123.0, [-600.0, 300.0]
    (out / "report.json").write_text(json.dumps(doc))
    env = {"OPSKEW_CACHE_DIR": str(tmp_path / "cache")}
    p = run_opskew("correct", cyc["raw_trace"], "--from", str(out), "--json", "-", env=env)
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    assert got["calibration"]["w_ns"] == 0.0
    assert any("W = -123.0 ns" in n and "taken at 0" in n for n in all_words(got["notes"])), got["notes"]
