"""opskew.profile's report as a typed result (docs/profile-reference.md, "The
report"): still the dict it was, with to_dict() (report.json's), rows() and
to_pandas() (the per-operator table), _repr_html_ for notebooks and
plot(path); and the picture `opskew profile` writes beside report.json."""

import copy
import json
import os
import pickle
import subprocess
import sys

import pytest

from conftest import run_opskew
from opskew.results.profile import CycleReport, ProfileResult
from test_results_profile import CYCLE as BASE


def op(name, calls, reported, corrected, lo, hi, mark, self_mark=None):
    return {"name": name, "calls": calls, "python": False, "category": "cpu_op", "reported_self_ns": reported,
            "reported_total_ns": reported, "added_ns": {"inside": 0.0, "operators_below": reported - corrected,
                                                        "python_below": 0.0, "other_threads": 0.0, "span": 0.0,
                                                        "scaled": 0.0},
            "descendants_per_call": 1.0, "corrected_self_ns": {"median": corrected, "ci95": [lo, hi]},
            "corrected_total_ns": {"median": corrected, "ci95": [lo, hi]}, "clamped": 0, "stretched_ns": 0.0,
            "marks": {"self": self_mark or mark, "total": mark}, "mark": mark}


OPS = [op("aten::linear", 10, 50000, 40000.0, 38000.0, 42000.0, "inflated"),
       op("aten::add<&>", 20, 20000, 19800.0, 19000.0, 20000.0, "believable"),
       op("aten::t", 30, 3000, 900.0, 0.0, 1500.0, "unknowable", "believable")]

# test_results_profile's cycle report, with the per-operator verdict a corrected cycle has.
CYCLE = dict(BASE, operators={"ops": OPS, "bytecode_rows": 0,
                              "marks": {"believable": 1, "inflated": 1, "unknowable": 1},
                              "summary": {"added_ns": 1000.0, "in_leaves_ns": 100.0, "in_parents_ns": 300.0,
                                          "between_top_level_ns": 600.0, "leaf_inflation": 0.01}})

FIRST = dict(CYCLE, cycle=1, w_ns={"median": 250.0, "ci95": None, "ci_coverage": None}, operators=None)

NO_MPL = "import sys; sys.modules['matplotlib'] = None\n"  # `import matplotlib` raises ImportError


def test_a_cycle_report_is_still_the_dict():
    r = CycleReport(CYCLE)
    assert isinstance(r, dict) and r == CYCLE and repr(r) == repr(CYCLE)
    assert json.dumps(r) == json.dumps(CYCLE) and r.to_dict() == CYCLE and dict(r) == CYCLE
    assert r["w_ns"]["median"] == r.w_median_ns == 210.5 and r.get("nothing") is None and "cycle" in r
    assert (r.cycle, r.pairs, r.skewed, r.kind) == (2, 12, True, "profile cycle")
    r["recorrect_error"] = "x"  # opskew.profile fills it in at stop(), as before
    assert r.to_dict()["recorrect_error"] == "x"
    assert str(CycleReport(CYCLE)).startswith("opskew.profile cycle 2: true step 80 us [78 us, 82 us")
    with pytest.raises(AttributeError):
        r.cycle = 3
    for again in (copy.deepcopy(r), copy.copy(r), pickle.loads(pickle.dumps(r))):  # as a dict's
        assert type(again) is CycleReport and again == r and again.w_median_ns == 210.5


def test_rows_and_pandas():
    r = CycleReport(CYCLE)
    rows = r.rows()
    assert [x["name"] for x in rows] == ["aten::linear", "aten::add<&>", "aten::t"]
    assert rows[0]["corrected_self_ns_median"] == 40000.0 and rows[0]["corrected_self_ns_ci95_low"] == 38000.0
    assert rows[2]["mark"] == "unknowable" and rows[2]["marks_self"] == "believable"
    assert CycleReport(FIRST).rows() == []
    try:
        import pandas  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError) as exc:
            r.to_pandas()
        assert "pip install pandas" in str(exc.value) and "\n" not in str(exc.value)
    else:
        df = r.to_pandas()
        assert list(df["name"]) == [x["name"] for x in rows] and df["corrected_total_ns_median"][0] == 40000.0


def test_the_notebook_view():
    html = CycleReport(CYCLE)._repr_html_()
    assert "W per operator event" in html and "210 ns [180 ns, 240 ns] (in-run, 12 pairs)" in html
    assert "1 believable, 1 inflated, 0 unresolved, 1 unknowable" in html and "SKEWED" in html
    assert "what to read" in html and "1 inflated: read their corrected times" in html
    assert "aten::add&lt;&amp;&gt;" in html and "aten::add<&>" not in html  # escaped
    for colour in ("#2a9d55", "#e08a00", "#c0392b"):  # each row coloured by its trust mark
        assert colour in html
    assert "where the skew lands" in html
    first = CycleReport(FIRST)._repr_html_()
    assert "(no 95% CI)" in first and "<th>name</th>" not in first


def test_the_picture_png_and_svg(tmp_path):
    pytest.importorskip("matplotlib")
    r = CycleReport(CYCLE, history=[CycleReport(FIRST), CYCLE],
                    conditions={"torch": "2.x", "device": "cpu", "threads": 1, "options": {"with_stack": True}})
    png, svg = tmp_path / "r.png", tmp_path / "r.svg"
    assert r.plot(png) == str(png) and r.plot(str(svg)) == str(svg)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = svg.read_text()
    assert "<svg" in text
    with pytest.raises(ValueError, match="must end in .png or .svg"):
        r.plot(tmp_path / "r.pdf")
    # A cycle without a corrected table still draws W per cycle.
    CycleReport(FIRST).plot(tmp_path / "first.png")
    doc = {"schema": "opskew.profile/1", "conditions": {"torch": "2.x", "device": "cpu", "threads": 1},
           "reports": [FIRST, CYCLE], "report": CYCLE, "final": None}
    ProfileResult(doc).plot(tmp_path / "run.svg")
    assert (tmp_path / "run.svg").read_text().startswith("<?xml")


def test_without_matplotlib_a_plot_says_how_to_get_it_in_one_line(tmp_path):
    code = NO_MPL + ("from opskew.results.profile import CycleReport\n"
                     f"from test_report_result import CYCLE\n"
                     "try:\n    CycleReport(CYCLE).plot(sys.argv[1])\n"
                     "except ImportError as exc:\n    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "r.png")], capture_output=True, text=True,
                         cwd=os.path.dirname(__file__), timeout=120)
    assert out.stdout == "plot needs matplotlib (pip install 'opskew[plot]')\n", out.stderr
    assert not (tmp_path / "r.png").exists()


def test_a_real_report_in_a_notebook(tmp_path):
    torch = pytest.importorskip("torch")
    import opskew

    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    x, y = torch.randn(8, 16), torch.randn(8, 4)
    sched = torch.profiler.schedule(skip_first=10, wait=21, warmup=1, active=7, repeat=2)
    with opskew.profile(activities=[torch.profiler.ProfilerActivity.CPU], schedule=sched, report_file=None) as p:
        for _ in range(80):
            opt.zero_grad()
            ((m(x) - y) ** 2).mean().backward()
            opt.step()
            p.step()
    assert all(isinstance(r, CycleReport) for r in p.reports) and p.report is p.reports[-1]
    rep = p.report
    assert rep.to_dict() == json.loads(json.dumps(rep, default=str))  # report.json's "report"
    html = rep._repr_html_()
    assert "opskew profile cycle" in html and "W per operator event" in html and "aten::addmm" in html
    assert len(rep.rows()) == len(rep["operators"]["ops"])
    try:
        import pandas  # noqa: F401
    except ImportError:
        pass
    else:
        assert len(rep.to_pandas()) == len(rep.rows())
    pytest.importorskip("matplotlib")
    rep.plot(tmp_path / "r.png")
    rep.plot(tmp_path / "r.svg")
    assert (tmp_path / "r.png").stat().st_size > 1000 and "<svg" in (tmp_path / "r.svg").read_text()


SCRIPT = """
import torch
m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
opt = torch.optim.SGD(m.parameters(), lr=0.01)
x, y = torch.randn(8, 16), torch.randn(8, 4)
for _ in range(45):
    opt.zero_grad()
    ((m(x) - y) ** 2).mean().backward()
    opt.step()
"""


@pytest.mark.parametrize("matplotlib", [True, False])
def test_opskew_profile_writes_the_picture(tmp_path, matplotlib):
    pytest.importorskip("torch")
    if matplotlib:
        pytest.importorskip("matplotlib")
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    env = dict(os.environ)
    if not matplotlib:  # a matplotlib that cannot be imported, first on the path
        fake = tmp_path / "fake" / "matplotlib"
        fake.mkdir(parents=True)
        (fake / "__init__.py").write_text("raise ImportError('hidden by the test')\n")
        env["PYTHONPATH"] = os.pathsep.join([str(fake.parent)] + [p for p in [env.get("PYTHONPATH")] if p])
    out = tmp_path / "prof"
    p = run_opskew("profile", "--repeat", "1", "-o", str(out), "--", sys.executable, str(script), env=env)
    assert p.returncode == 0, p.stderr
    assert json.loads((out / "report.json").read_text())["report"]["cycle"] == 1
    if matplotlib:
        assert f"opskew profile: picture {out / 'report.png'}" in p.stderr
        assert (out / "report.png").read_bytes()[:4] == b"\x89PNG"
    else:
        assert "opskew profile: no picture: plot needs matplotlib (pip install 'opskew[plot]')\n" in p.stderr
        assert not (out / "report.png").exists()
