"""`opskew sweep`: the skew curve, the crossover size and the plot."""

import json
import os

import pytest

WL = os.path.join(os.path.dirname(__file__), "workloads", "wl.py")
FAST = ("--trials", "3", "--window-ms", "1")


def test_crossover_is_the_last_crossing_log_interpolated():
    from opskew.commands.sweep import _crossover

    def pts(ratios):
        return [{"size": 4 ** i, "op": 1.0, "added_per_call_s": r} for i, r in enumerate(ratios)]

    # Added cost 4x the op at size 1, 1/4 at size 4: crossing at 2 in log space.
    assert _crossover(pts([4.0, 0.25]), "op") == pytest.approx(2.0)
    # A noisy dip below 1 at a small size does not hide the real crossing.
    assert _crossover(pts([2.0, 0.9, 2.0, 0.5]), "op") == pytest.approx(16 * 4 ** (1 / 2))
    assert _crossover(pts([0.5, 0.2]), "op") is None   # never costs more
    assert _crossover(pts([3.0, 2.0]), "op") is None   # always costs more


def test_sweep_add_writes_plot_table_and_json(opskew, tmp_path):
    out = tmp_path / "sw"
    js = tmp_path / "sw.json"
    p = opskew("sweep", "--op", "add", "--sizes", "1,64,4096,65536", *FAST,
               "--instrument", "torch:record_shapes,with_stack", "--instrument", "opskew",
               "--out", str(out), "--json", str(js))
    assert p.returncode == 0, p.stderr
    for ext in ("png", "svg"):
        data = (tmp_path / f"sw.{ext}").read_bytes()
        assert len(data) > 10_000
    assert (tmp_path / "sw.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = (tmp_path / "sw.svg").read_text()
    # Readable: axis labels with units, and a legend naming each instrument.
    assert "microseconds" in svg and "elements per input tensor" in svg
    assert "opskew tracer" in svg and "record_shapes=True" in svg
    r = json.loads(js.read_text())
    assert r["schema"] == "opskew.sweep/1" and r["status"] == "complete"
    (curve,) = r["curves"]
    assert [pt["size"] for pt in curve["points"]] == [1, 64, 4096, 65536]
    for pt in curve["points"]:
        assert pt["true_per_call_s"] > 0 and pt["op_duration_from"] == "opskew"
        for d in pt["by"].values():
            assert d["events_per_call"] == 1 and d["reported_per_call_s"] > 0
    assert set(curve["crossover"]) == {"torch:record_shapes,with_stack", "opskew"}
    assert "crossover" in p.stdout
    # The operator grows with size; the added cost per call does not grow as fast.
    pts = curve["points"]
    assert pts[-1]["op_duration_s"] > 5 * pts[0]["op_duration_s"]


def test_sweep_other_ops_and_user_op(opskew, tmp_path):
    js = tmp_path / "o.json"
    p = opskew("sweep", "--op", "mul", "--op", "matmul", "--op", f"{WL}:sized_relu",
               "--sizes", "1,256", *FAST, "--instrument", "torch", "--no-plot", "--json", str(js))
    assert p.returncode == 0, p.stderr
    r = json.loads(js.read_text())
    assert [c["op"] for c in r["curves"]] == ["mul", "matmul", f"{WL}:sized_relu"]
    for c in r["curves"]:
        assert len(c["points"]) == 2


def test_sweep_bad_input(opskew, tmp_path):
    p = opskew("sweep", "--op", "conv9d")
    assert p.returncode == 2 and "unknown --op" in p.stderr
    p = opskew("sweep", "--instrument", "torch:with_everything")
    assert p.returncode == 2 and "unknown profiler option" in p.stderr
    p = opskew("sweep", "--sizes", "1,x")
    assert p.returncode == 2 and "bad --sizes" in p.stderr
    p = opskew("sweep", "--out", str(tmp_path / "no" / "dir" / "x"))
    assert p.returncode == 2 and "directory does not exist" in p.stderr
