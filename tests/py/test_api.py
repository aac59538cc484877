"""The Python API (opskew.api, docs/api.md): the same figures as the command
line's JSON, and the result object.

Commands that time a workload cannot give equal timings twice, so the API
and the command line are compared on the same trials: the API's run records
its rounds (opskew.measure.run_rounds, the real one, wrapped), and the command
line (cli.main, in this process) is then fed those very rounds; every figure
derived from them must be equal. One command-line run in a subprocess checks
that the real command gives the same schema, field set and conditions.
"""

import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

import opskew  # noqa: E402
from opskew import cli  # noqa: E402
from opskew.measure import rounds as measure
from opskew.errors import WorkloadError  # noqa: E402

SMALL = {"trials": 4, "iters": 2, "calls": 50, "warmup": 0.0}
SMALL_ARGS = ["--trials", "4", "--iters", "2", "--calls", "50", "--warmup", "0"]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def record_rounds(monkeypatch):
    """Wraps the real run_rounds: each call's rounds are kept, in order."""
    kept = []
    real = measure.run_rounds

    def recording(*a, **k):
        kept.append(real(*a, **k))
        return kept[-1]

    monkeypatch.setattr(measure, "run_rounds", recording)
    return kept


def replay(monkeypatch, kept):
    """run_rounds hands back the recorded rounds, in the order they were made."""
    it = iter(list(kept))
    monkeypatch.setattr(measure, "run_rounds", lambda *a, **k: next(it))


def cli_json(tmp_path, capsys, argv, name="cli.json"):
    """The command line in this process: exit code, stdout, parsed --json."""
    out = tmp_path / name
    rc = cli.main([*argv, "--json", str(out)])
    text = capsys.readouterr().out
    return rc, text, json.loads(out.read_text())


def without_date(d):
    d = json.loads(json.dumps(d))
    d["conditions"].pop("date", None)
    return d


def test_import_opskew_does_not_import_torch():
    code = "import sys, opskew; opskew.check; opskew.Result; assert 'torch' not in sys.modules, 'torch'"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


# -- (a) summary: exactly the command line's JSON ------------------------------

@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    from test_summary import record

    path = tmp_path_factory.mktemp("api") / "t.json"
    record(path)
    return path


def test_summary_equals_cli_json(trace, tmp_path):
    for opts, argv in (({}, []), ({"sort": "self", "top": 3}, ["--sort", "self", "--top", "3"]),
                       ({"cat": ["cpu_op"]}, ["--cat", "cpu_op"])):
        p = subprocess.run([sys.executable, "-m", "opskew", "summary", str(trace), *argv, "--json", "-"],
                           capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        r = opskew.summary(trace, **opts)
        assert r.to_dict() == json.loads(p.stdout)
        assert r.kind == "summary" and r.schema == "opskew.summary/1" and r.status == "ok"
        # repr is the table the command prints (without --json)
        p2 = subprocess.run([sys.executable, "-m", "opskew", "summary", str(trace), *argv],
                            capture_output=True, text=True)
        assert repr(r) == p2.stdout.rstrip("\n")


def test_summary_of_a_truncated_trace_warns(trace, tmp_path):
    cut = tmp_path / "cut.json"
    data = trace.read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    p = subprocess.run([sys.executable, "-m", "opskew", "summary", str(cut), "--json", "-"],
                       capture_output=True, text=True)
    assert p.returncode == 5, p.stderr
    with pytest.warns(RuntimeWarning, match="opskew.summary: "):
        r = opskew.summary(cut)
    assert r.status == "truncated" and r.warnings
    assert r.to_dict() == json.loads(p.stdout)


def test_summary_rows_html_and_errors(trace):
    r = opskew.summary(trace, top=5)
    names = [o["name"] for o in r.ops]
    assert [row["name"] for row in r.rows()] == names and "aten::add" in names
    html = r._repr_html_()
    # the HTML table shows the first `top` operators (which ones depends on timing)
    assert "<table>" in html and all(n in html for n in names[:5]) and html.count("<tr>") >= 5
    assert not any(f">{n}<" in html for n in names[5:])
    with pytest.raises(TypeError, match="unexpected keyword argument 'sortt'.*valid: align, calibration, cat, corrected, from_out, sort, top, w"):
        opskew.summary(trace, sortt="self")
    with pytest.raises(TypeError, match="json.*to_dict"):
        opskew.summary(trace, json="-")
    with pytest.raises(ValueError, match="sort='fast'"):
        opskew.summary(trace, sort="fast")
    with pytest.raises(AttributeError, match="no field 'nope'"):
        r.nope


# -- (b) check, matrix, sweep, advise: the same figures from the same trials ---

def test_check_same_figures_as_cli_on_the_same_trials(record_rounds, monkeypatch, tmp_path, capsys):
    opts = dict(SMALL, instrument="busy-wait:2000", against="busy-wait:0", threshold=0.1)
    r = opskew.check(**opts)
    assert len(record_rounds) == 1
    replay(monkeypatch, record_rounds)
    rc, text, cli = cli_json(tmp_path, capsys, ["check", "--instrument", "busy-wait:2000", "--against",
                                                "busy-wait:0", "--threshold", "0.1", *SMALL_ARGS])
    assert rc == 0
    assert without_date(r.to_dict()) == without_date(cli)  # every figure, the same
    assert r.added_per_event_ns == cli["added_per_event_ns"] and r.conditions["trials"] == 4
    # the known cost: W near 2000 ns (loose: four pairs on a shared machine;
    # the method's accuracy is test_known_answer's)
    assert 500 < r.added_per_event_ns["median"] < 8000
    # repr is the text the command printed
    assert repr(r) == text.rstrip("\n")


def test_check_cli_subprocess_same_schema_fields_conditions(tmp_path):
    out = tmp_path / "c.json"
    argv = ["--instrument", "busy-wait:2000", "--against", "busy-wait:0", *SMALL_ARGS]
    p = subprocess.run([sys.executable, "-m", "opskew", "check", *argv, "--json", str(out)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    cli = json.loads(out.read_text())
    r = opskew.check(instrument="busy-wait:2000", against="busy-wait:0", **SMALL).to_dict()
    assert r["schema"] == cli["schema"] == "opskew.check/1"
    assert set(r) == set(cli)
    cc, rc = dict(cli["conditions"]), dict(r["conditions"])
    for c in (cc, rc):
        c.pop("date")
        c.pop("warmup_ran_s")  # the warm-up actually spent
        c.pop("first_session_s")  # the profiler's first session, timed
    # the clock is calibrated in each process: the same kind, the same rate within its uncertainty
    ck, rk = cc.pop("clock"), rc.pop("clock")
    assert ck["kind"] == rk["kind"]
    assert rk["ns_per_tick"] == pytest.approx(ck["ns_per_tick"], rel=max(1e-3, 10 * ck["rel_uncertainty"]))
    assert rc == cc
    for w in (r["added_per_event_ns"]["median"], cli["added_per_event_ns"]["median"]):
        assert 500 < w < 8000


def test_matrix_same_figures_as_cli_on_the_same_trials(record_rounds, monkeypatch, tmp_path, capsys):
    r = opskew.matrix(trials=3, iters=2, calls=50, warmup=0.0, no_export=True, no_tracer=True)
    replay(monkeypatch, record_rounds)
    rc, text, cli = cli_json(tmp_path, capsys, ["matrix", "--trials", "3", "--iters", "2", "--calls", "50",
                                                "--warmup", "0", "--no-export", "--no-tracer"])
    assert rc == 0 and r.schema == "opskew.matrix/1"
    assert without_date(r.to_dict()) == without_date(cli)
    assert repr(r) == text.rstrip("\n")
    rows = r.rows()
    assert [x["row"] for x in rows] == [x["row"] for x in cli["rows"]] and "minimal" in [x["row"] for x in rows]
    html = r._repr_html_()
    assert "minimal" in html
    # 3 trials reach no 95% interval: each interval says its own coverage, as the text table's note does
    cov = next(x for x in r.to_dict()["rows"] if x["row"] == "minimal")["in_window_per_event_ns"]["ci_coverage"]
    assert cov < 0.95 and f"({100 * cov:.0f}% interval: too few rounds for 95%)" in html


def test_sweep_same_figures_as_cli_on_the_same_trials(record_rounds, monkeypatch, tmp_path, capsys):
    # --window-ms this small makes every window the minimum of 3 calls: the
    # calls per trial do not depend on a timing either.
    opts = {"op": "add", "instrument": "torch", "sizes": "4,64", "trials": 2, "window_ms": 1e-6}
    r = opskew.sweep(**opts)
    assert len(record_rounds) == 2 and "plots" not in r  # the API draws nothing unasked
    replay(monkeypatch, record_rounds)
    rc, text, cli = cli_json(tmp_path, capsys, ["sweep", "--op", "add", "--instrument", "torch", "--sizes", "4,64",
                                                "--trials", "2", "--window-ms", "1e-6", "--no-plot"])
    assert rc == 0
    assert without_date(r.to_dict()) == without_date(cli)
    assert repr(r) == text.rstrip("\n")
    rows = r.rows()
    assert [(x["size"], x["instrument"]) for x in rows] == [(4, "torch"), (64, "torch")]
    assert rows[0]["calls_per_trial"] == 3
    paths = r.plot(str(tmp_path / "curve"))
    assert paths == [str(tmp_path / "curve.png"), str(tmp_path / "curve.svg")]
    assert (tmp_path / "curve.png").read_bytes()[:4] == b"\x89PNG"


def test_advise_same_figures_as_cli_on_the_same_trials(record_rounds, monkeypatch, tmp_path, capsys):
    r = opskew.advise(trials=3, iters=2, calls=50, warmup=0.0, cold_iters=4, need="shapes")
    replay(monkeypatch, record_rounds)
    rc, text, cli = cli_json(tmp_path, capsys, ["advise", "--trials", "3", "--iters", "2", "--calls", "50",
                                                "--warmup", "0", "--cold-iters", "4", "--need", "shapes"])
    assert rc == 0
    a, c = without_date(r.to_dict()), without_date(cli)
    assert set(a) == set(c) and a["conditions"] == c["conditions"] and a["needs"] == ["shapes"]
    # The cold start is timed outside the rounds: the figures of the rounds are equal.
    assert a["candidates"] == c["candidates"]
    assert a["baseline_per_iter_s"] == c["baseline_per_iter_s"]
    assert a["recommended"]["name"] == c["recommended"]["name"]
    assert [x["candidate"] for x in r.rows()] == list(c["candidates"])


# -- (c) the result object, the workload, errors -------------------------------

def test_callable_workload_with_setup_repr_html_round_trip():
    a = torch.ones(4)

    def step(t):
        for _ in range(50):
            torch.add(t, t)

    r = opskew.check(step, setup=lambda: a, instrument="busy-wait:500", **{k: v for k, v in SMALL.items()
                                                                           if k != "calls"})
    d = r.to_dict()
    assert json.loads(json.dumps(d)) == d and d["schema"] == "opskew.check/1"
    assert d["conditions"]["workload"]["target"].endswith("step") and d["status"] == "complete"
    assert r.events_per_iter == pytest.approx(50, abs=2)  # the callable ran, 50 adds per iteration
    assert repr(r).startswith("opskew check: ") and "added per event (W)" in repr(r)
    html = r._repr_html_()
    assert "added per event (W)" in html and "busy-wait" in html
    # setup as a value, not a callable
    # setup as a value; the run pins threads=2 and leaves the caller's count as it was
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        r2 = opskew.check(step, setup=a, instrument="busy-wait:500", trials=2, iters=1, warmup=0.0, threads=2)
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
    assert r2.events_per_iter == pytest.approx(50, abs=2) and r2.conditions["threads"] == 2


def test_unknown_keyword_and_bad_arguments():
    with pytest.raises(TypeError, match=r"opskew.check\(\) got an unexpected keyword argument 'trails'.*"
                                        r"valid: .*trials"):
        opskew.check(trails=3)
    with pytest.raises(TypeError, match="fail_on_skew"):
        opskew.check(fail_on_skew=True)
    with pytest.raises(TypeError, match="unexpected keyword argument 'setup_name'"):
        opskew.matrix(setup_name="x")
    with pytest.raises(ValueError, match="device='tpu'"):
        opskew.check(device="tpu")
    from opskew.errors import UsageError

    with pytest.raises(UsageError, match="takes 1 argument"):
        opskew.check(lambda x: None, trials=2)


def test_workload_error_carries_the_partial_result():
    calls = {"n": 0}

    def flaky():
        calls["n"] += 1
        if calls["n"] > 30:
            raise ValueError("synthetic failure")
        for _ in range(20):
            torch.add(torch.ones(2), 1)

    with pytest.raises(WorkloadError, match="synthetic failure") as info:
        opskew.check(flaky, instrument="busy-wait:200", trials=50, iters=2, warmup=0.0)
    part = info.value.partial
    assert isinstance(part, opskew.Result) and part.status == "workload-error"
    assert part.pairs >= 2 and "synthetic failure" in part.error
    assert isinstance(info.value.__cause__, ValueError)  # the workload's own exception, chained
    assert "PARTIAL" in repr(part) and json.loads(json.dumps(part.to_dict()))["status"] == "workload-error"


@pytest.fixture(scope="module")
def verdict_check():
    """A check with the per-operator verdict (the torch instrument), on tiny
    operators under an annotation: the instrument's cost is a large share of
    the step, so W is well above the noise of a shared machine."""
    a, b = torch.ones(4), torch.ones(4)

    def step():
        with torch.profiler.record_function("block"):
            for _ in range(150):
                torch.add(a, b)
                torch.mul(a, b)

    return opskew.check(step, trials=6, iters=3, warmup=0.1)


def test_check_verdict_html_rows_plot(verdict_check, tmp_path):
    r = verdict_check
    assert "operators" in r, r.to_dict().get("correction_error")
    names = [o["name"] for o in r.operators["ops"]]
    assert {"aten::add", "aten::mul", "block"} <= set(names)
    html = r._repr_html_()
    for mark in {o["mark"] for o in r.operators["ops"][:15]}:
        assert mark in html
    assert "where the skew lands" in html and "per-operator verdict" in repr(r)
    assert "of the time W adds" in r.where_skew_lands() or "nothing measurable" in r.where_skew_lands()
    rows = r.rows()
    assert rows[0]["name"] == names[0] and "corrected_self_ns_ci95_low" in rows[0] and "mark" in rows[0]
    png = tmp_path / "v.png"
    assert r.plot(str(png)) == str(png) and png.read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(ValueError, match=".png or .svg"):
        r.plot(str(tmp_path / "v.pdf"))


def test_to_pandas(verdict_check, trace):
    try:
        import pandas  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="pip install pandas"):
            verdict_check.to_pandas()
        pytest.skip("pandas is not installed: to_pandas() says so")
    df = verdict_check.to_pandas()
    assert list(df["name"]) == [o["name"] for o in verdict_check.operators["ops"]]
    assert set(df["mark"]) <= {"believable", "inflated", "unresolved", "unknowable"}
    s = opskew.summary(trace).to_pandas()
    assert len(s) == len(opskew.summary(trace).ops) and "self_ns" in s.columns


# -- (5) the notebook-style example ---------------------------------------------

def test_example_prints_the_per_operator_verdict(tmp_path):
    env = dict(os.environ)
    p = subprocess.run([sys.executable, os.path.join(ROOT, "docs", "examples", "verdict.py")],
                       capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "per-operator verdict" in out
    assert any(m in out for m in ("believable", "inflated", "unresolved", "unknowable"))
    assert "aten::addmm" in out or "aten::linear" in out
    assert "where the skew lands" in out
    assert list(tmp_path.iterdir()) == []  # it writes nothing


def test_wrong_argument_kinds_name_what_is_wrong(tmp_path):
    """A path that is no path, a value an option cannot take, and a list of
    inputs to compare: each says what it is about (compare takes the list)."""
    import opskew

    with pytest.raises(TypeError, match="expected a path .* got NoneType"):
        opskew.summary(None)
    with pytest.raises(TypeError, match="got int: 5"):
        opskew.compare("a.json", 5)
    with pytest.raises(ValueError, match=r"opskew.check\(\): trials='nine'"):
        opskew.check(trials="nine")
    with pytest.raises(ValueError, match=r"opskew.check\(\): trials=9.5: expected a whole number"):
        opskew.check(trials=9.5)
    with pytest.raises(ValueError, match=r"threshold=nan: not a finite number"):
        opskew.check(threshold=float("nan"))
    with pytest.raises(opskew.errors.UsageError, match="not found"):  # the list was taken as two inputs
        opskew.compare([str(tmp_path / "a.json"), str(tmp_path / "b.json")])
