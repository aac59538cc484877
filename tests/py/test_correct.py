"""`opskew calibrate` and `opskew correct` end to end, against real torch traces."""

import json
import os
import subprocess
import sys

import pytest

from conftest import run_opskew

HERE = os.path.dirname(__file__)
CAL = ("--trials", "5", "--iters", "3", "--calls", "300", "--warmup", "0.1")

MAKE_TRACE = r"""
import sys, torch
sys.path.insert(0, {wl!r})
import wl
torch.set_num_threads(1)
s = wl.mlp_setup()
for _ in range(5): wl.mlp_step(s)
with torch.profiler.profile(record_shapes={shapes}) as p:
    for _ in range(5):
        with torch.profiler.record_function("opskew::iteration"):
            wl.mlp_step(s)
p.export_chrome_trace(sys.argv[1])
"""


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    d = tmp_path_factory.mktemp("cache")
    p = run_opskew("calibrate", *CAL, "--inject", "2000", env={"OPSKEW_CACHE_DIR": str(d)})
    assert p.returncode == 0, p.stderr
    assert "validation: injected 2000 ns" in p.stdout
    return d


def make_trace(path, shapes=False):
    code = MAKE_TRACE.format(wl=os.path.join(HERE, "workloads"), shapes=shapes)
    p = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True,
                       env=dict(os.environ, KINETO_LOG_LEVEL="6"))
    assert p.returncode == 0, p.stderr
    return path


def test_calibrate_stores_and_shows(cache):
    files = sorted(os.listdir(cache / "calibrations"))
    assert any(f.startswith("torch.profiler-minimal-cpu-t1-") for f in files)
    assert any(f.startswith("opskew-itt-cpu-t1-") for f in files)
    cal = json.loads((cache / "calibrations" / [f for f in files if f.startswith("torch")][0]).read_text())
    assert cal["schema"] == "opskew.calibration/1"
    assert cal["key"]["instrument"] == "torch.profiler" and cal["key"]["torch"].startswith("2.")
    assert 0 <= cal["delta_ns"]["median"] <= max(cal["w_ns"]["median"], 0)
    assert cal["validation"]["injected_ns"] == 2000
    p = run_opskew("calibrate", "--show", env={"OPSKEW_CACHE_DIR": str(cache)})
    assert p.returncode == 0 and "minimal" in p.stdout and "opskew" in p.stdout


def test_correct_torch_trace(cache, tmp_path):
    trace = make_trace(tmp_path / "mlp.json")
    out = tmp_path / "corr.json"
    js = tmp_path / "r.json"
    p = run_opskew("correct", str(trace), "-o", str(out), "--json", str(js),
                   env={"OPSKEW_CACHE_DIR": str(cache)})
    assert p.returncode == 0, p.stderr
    r = json.loads(js.read_text())
    assert r["detected"]["config"] == "minimal"
    ops = {o["name"]: o for o in r["ops"]}
    it = ops["opskew::iteration"]
    assert it["calls"] == 5 and it["descendants"] > 100
    w, d = r["calibration"]["w_ns"], r["calibration"]["delta_ns"]
    # The formula, per operator: corrected = reported - delta*calls - W*descendants (no clamping here).
    for o in r["ops"]:
        if o["clamped"] == 0:
            expect = o["reported_total_ns"] - d * o["calls"] - w * o["descendants"]
            assert o["corrected_total_ns"] == pytest.approx(expect, abs=1e-3 * o["calls"] + 1e-6)
    assert 0 < r["instrument_share"] < 1
    # The corrected trace opens as JSON, keeps the reported times, and nests.
    data = json.loads(out.read_text())
    xs = [e for e in data["traceEvents"] if e["ph"] == "X"]
    assert len(xs) == r["stats"]["corrected_events"]
    assert all("reported_dur" in e["args"] for e in xs)
    iters = sorted((e for e in xs if e["name"] == "opskew::iteration"), key=lambda e: e["ts"])
    inside = [e for e in xs if iters[0]["ts"] <= e["ts"] < iters[0]["ts"] + iters[0]["dur"]]
    assert all(e["ts"] + e["dur"] <= iters[0]["ts"] + iters[0]["dur"] + 1e-3 for e in inside)


def test_correct_refuses_mismatched_calibration(cache, tmp_path):
    trace = make_trace(tmp_path / "shapes.json", shapes=True)
    p = run_opskew("correct", str(trace), env={"OPSKEW_CACHE_DIR": str(cache)})
    assert p.returncode == 2 and "no stored calibration for torch.profiler (record_shapes)" in p.stderr
    cal = next(f for f in os.listdir(cache / "calibrations") if "minimal" in f)
    p = run_opskew("correct", str(trace), "--calibration", str(cache / "calibrations" / cal))
    assert p.returncode == 2 and "looks like" in p.stderr and "--force" in p.stderr
    p = run_opskew("correct", str(trace), "--calibration", str(cache / "calibrations" / cal), "--force")
    assert p.returncode == 0, p.stderr


def test_correct_opskew_trace(cache, tmp_path):
    trace = tmp_path / "t.json"
    p = run_opskew("record", "-o", str(trace), "--", sys.executable, "-c",
                   "import torch; a=torch.ones(1); [torch.add(a, a) for _ in range(1000)]")
    assert p.returncode == 0, p.stderr
    js = tmp_path / "r.json"
    p = run_opskew("correct", str(trace), "--json", str(js), env={"OPSKEW_CACHE_DIR": str(cache)})
    assert p.returncode == 0, p.stderr
    r = json.loads(js.read_text())
    assert r["detected"] == {"instrument": "opskew", "config": "itt", "options": {}}
    assert {o["name"]: o for o in r["ops"]}["aten::add"]["calls"] == 1000


def test_correct_bad_input(cache, tmp_path):
    env = {"OPSKEW_CACHE_DIR": str(cache)}
    p = run_opskew("correct", str(tmp_path / "missing.json"), env=env)
    assert p.returncode == 2 and "trace not found" in p.stderr
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents":[{"ph":"X","name":"a",]}')
    p = run_opskew("correct", str(bad), env=env)
    assert p.returncode == 2 and "invalid trace" in p.stderr and "byte" in p.stderr
    assert "Traceback" not in p.stderr


def test_correct_truncated_trace_exits_5(cache, tmp_path):
    full = make_trace(tmp_path / "full.json").read_bytes()
    cut = tmp_path / "cut.json"
    cut.write_bytes(full[: len(full) * 2 // 3])
    out = tmp_path / "cut_corr.json"
    p = run_opskew("correct", str(cut), "-o", str(out), env={"OPSKEW_CACHE_DIR": str(cache)})
    assert p.returncode == 5, p.stderr
    assert "WARNING" in p.stdout and "ended early" in p.stderr
    assert json.loads(out.read_text())["traceEvents"]
