"""One W for opskew's tracer (docs/tracer.md): the in-window W that
`opskew calibrate` stored is what the trace's header, its summary, `opskew
record`'s summary and `opskew correct` all use; without one, all of them use
the self-calibration, which the header calls a lower bound."""

import json
import os
import subprocess
import sys

import pytest

from conftest import run_opskew, seed_native_cache

# A distinct W per instrument, so that whichever the run ends up using is known.
STORED = {"native": 250.0, "itt": 260.0, "pyhook": 270.0}

CODE = r"""
import json, sys
import opskew, torch
a = torch.ones(4)
with opskew.trace(sys.argv[1]) as t:
    for _ in range(200):
        torch.add(a, a)
print(json.dumps({"instrument": t.instrument, "calibration": t.calibration, "summary": str(t.summary)}))
"""


def store_tracer_calibrations(cache):
    import torch

    from opskew.calibration import store as calibration

    d = cache / "calibrations"
    d.mkdir(parents=True, exist_ok=True)
    for inst, w in STORED.items():
        key = calibration.make_key("opskew", inst, torch.__version__, "cpu", 1)
        key["workload"] = "builtin:add"
        cal = {"schema": calibration.SCHEMA, "date": "2026-12-03T07:00:00+0000", "key": key,
               "w_ns": {"median": w, "ci95": [w - 10, w + 10], "ci_coverage": 0.965},
               "delta_ns": {"median": 12.0}}
        (d / (calibration.key_id(key) + ".json")).write_text(json.dumps(cal))


def trace_in_process(tmp_path, cache):
    out = tmp_path / "t.json"
    p = subprocess.run([sys.executable, "-c", CODE, str(out)], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, OPSKEW_CACHE_DIR=str(cache)))
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1]), json.loads(out.read_text())["opskew"]


@pytest.fixture
def cache(tmp_path):
    d = tmp_path / "cache"
    d.mkdir()
    seed_native_cache(d)
    return d


def correct_w(trace, cache, tmp_path):
    js = tmp_path / "c.json"
    p = run_opskew("correct", str(trace), "--json", str(js), env={"OPSKEW_CACHE_DIR": str(cache)})
    assert p.returncode == 0, p.stderr
    return json.loads(js.read_text())["calibration"]


def test_a_stored_in_window_w_is_the_one_w_everywhere(tmp_path, cache):
    store_tracer_calibrations(cache)
    got, header = trace_in_process(tmp_path, cache)
    w = STORED[got["instrument"]]
    assert got["calibration"]["w_ns"] == w and "opskew calibrate, in-window" in got["calibration"]["w_source"]
    assert header["calibration"]["w_ns"] == w and header["calibration"]["w_source"] == got["calibration"]["w_source"]
    assert f"W {w:.1f} ns/event" in got["summary"]
    cal = correct_w(tmp_path / "t.json", cache, tmp_path)
    # The trace's own W and delta (the delta its session measured, as its summary used).
    assert cal["w_ns"] == w and cal["delta_ns"] == pytest.approx(header["calibration"]["delta_ns"], rel=1e-9)
    assert cal["source"].startswith("the trace's header: opskew calibrate")


def test_without_a_calibration_the_self_calibration_is_used_everywhere_and_called_a_lower_bound(tmp_path, cache):
    got, header = trace_in_process(tmp_path, cache)
    w = got["calibration"]["w_ns"]
    assert "lower bound" in got["calibration"]["w_source"] and header["calibration"]["w_ns"] == pytest.approx(w, rel=1e-9)
    assert "lower bound" in got["summary"]
    cal = correct_w(tmp_path / "t.json", cache, tmp_path)  # no stored calibration: the trace's own
    assert cal["w_ns"] == pytest.approx(w) and cal["source"].startswith("the trace's header")


def test_record_uses_the_stored_w(tmp_path, cache):
    store_tracer_calibrations(cache)
    out = tmp_path / "r.json"
    p = run_opskew("record", "-o", str(out), "--summary", "--", sys.executable, "-c",
                   "import torch\na = torch.ones(4)\nfor _ in range(100): torch.add(a, a)",
                   env={"OPSKEW_CACHE_DIR": str(cache)})
    assert p.returncode == 0, p.stderr
    header = json.loads(out.read_text())["opskew"]
    w = STORED[header["instrument"]]
    assert header["calibration"]["w_ns"] == w and "opskew calibrate" in header["calibration"]["w_source"]
    assert f"W {w:.1f} ns/event" in p.stdout + p.stderr
    assert correct_w(out, cache, tmp_path)["w_ns"] == w
