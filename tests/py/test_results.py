"""Typed results (opskew.results): a command's JSON read back as its class,
unchanged, with the command line's text; refusals of what is not a result."""

import json

import pytest

import opskew
from opskew.errors import UsageError
from opskew.results import CompareResult, CorrectResult, Result, SummaryResult, load

from conftest import run_opskew


def _trace(path, adds=3):
    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1,
               "ts": 10.0 * i, "dur": 2.0} for i in range(adds)]
    events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mul", "pid": 1, "tid": 1, "ts": 100.0, "dur": 5.0})
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_a_summary_written_by_the_command_line_loads_as_its_class(tmp_path):
    trace = _trace(tmp_path / "t.json")
    out = tmp_path / "s.json"
    p = run_opskew("summary", str(trace), "--json", str(out))
    assert p.returncode == 0, p.stderr
    r = load(out)
    assert type(r) is SummaryResult and r.kind == "summary" and r.schema == "opskew.summary/1"
    assert r.to_dict() == json.loads(out.read_text())
    assert [o["name"] for o in r.ops] == ["aten::add", "aten::mul"] and r.rows()[0]["calls"] == 3
    # Its text is the command line's table.
    text = run_opskew("summary", str(trace))
    assert text.returncode == 0 and str(r) == text.stdout.rstrip("\n")
    assert "<table>" in r._repr_html_()


def test_the_api_returns_the_same_class_and_figures(tmp_path):
    trace = _trace(tmp_path / "t.json")
    r = opskew.summary(trace)
    assert isinstance(r, SummaryResult) and isinstance(r, opskew.Result)
    assert Result.from_dict(r.to_dict()).to_dict() == r.to_dict()
    c = opskew.compare(trace, trace)
    assert isinstance(c, CompareResult) and c.rows()[0]["name"] == "aten::add"


def test_each_schema_has_its_class():
    assert type(Result.from_dict({"schema": "opskew.correct/1", "ops": [{"name": "a", "self_ns": 1}]})) \
        is CorrectResult
    assert type(Result.from_dict({"schema": "opskew.job_summary/1", "merged": {"ops": []}})) is SummaryResult


def test_what_is_not_a_result_is_refused(tmp_path):
    with pytest.raises(UsageError, match="schema 'something/1'"):
        Result.from_dict({"schema": "something/1"})
    with pytest.raises(UsageError, match="JSON object"):
        Result.from_dict([1, 2])
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(UsageError, match="is not JSON"):
        load(bad)
    with pytest.raises(UsageError, match="cannot read"):
        load(tmp_path / "missing.json")
    r = Result.from_dict({"schema": "opskew.summary/1", "ops": [], "status": "ok"})
    with pytest.raises(AttributeError, match="read-only"):
        r.status = "x"


def test_a_correct_result_shows_its_table_and_notes_in_a_notebook(tmp_path):
    """`_repr_html_` of opskew correct's result fell through to sweep's
    table and raised KeyError 'op'. It shows correct's own table, its
    calibration and its notes in words (they are records)."""
    import json

    from opskew import results

    doc = {"schema": "opskew.correct/1", "trace": "t.json", "detected": {}, "out": None, "omitted": 0,
           "calibration": {"w_ns": 700.0, "delta_ns": 0.0, "w_py_ns": 0.0, "delta_py_ns": 0.0, "source": "--w",
                           "key": {}},
           "notes": [{"code": "cross_thread_waits", "severity": "caveat", "waited_ns": 2000.0, "threads": 2}],
           "stats": {}, "truncated": False, "warning": None, "truncated_at": None, "instrument_share": 0.25,
           "ops": [{"name": "aten::add", "calls": 2, "reported_total_ns": 4000.0, "corrected_total_ns": 3000.0,
                    "reported_self_ns": 4000.0, "corrected_self_ns": 3000.0, "clamped": 0}]}
    p = tmp_path / "r.json"
    p.write_text(json.dumps(doc))
    html = results.load(p)._repr_html_()
    assert "aten::add" in html and "corrected total" in html and "700 ns" in html and "25.0%" in html
    assert "2.0 us of other threads&#x27; instrument time" in html
