"""`opskew sweep`: the skew curve, the crossover size and the plot."""

import json
import os

import pytest

WL = os.path.join(os.path.dirname(__file__), "workloads", "wl.py")
FAST = ("--trials", "3", "--window-ms", "1")
SEEN = ("--trials", "6", "--window-ms", "1")  # 6 rounds: the fewest whose CI reaches 95%


def test_crossover_is_the_last_crossing_log_interpolated():
    from opskew.experiments.sweep import _crossover

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
    # Each point: the leaf's own skew and the enclosing annotation's (issue 13).
    for pt in pts:
        for iname, d in pt["by"].items():
            # Absent only for a reference trace that is not opskew's (1 by construction).
            assert d["reported_over_op"] > 0 if iname != pt["op_duration_from"] or iname.startswith("opskew") \
                else "reported_over_op" not in d
            enc = d["enclosing"]
            assert enc["name"] == "opskew.sweep.calls" and enc["reported_s"] > 0
            # The median of the rounds' ratios, inside its CI (3 rounds: the range).
            lo, hi = enc["skew_ci95"] or [min(0, enc["skew"]), enc["skew"]]
            assert lo <= enc["skew"] <= hi and enc["skew"] > 0
            if pt["op_duration_from"] in pt["by"] and d is pt["by"][pt["op_duration_from"]]:
                assert d["reported_over_op"] == pytest.approx(1.0)
            assert enc["true_s"] == pytest.approx(pt["true_per_call_s"] * pt["calls_per_trial"])
            lo, hi = d["added_per_call_ci95_s"]
            assert lo <= d["added_per_call_s"] <= hi
            assert "noisy" in d
    assert "leaf skew" in p.stdout and "enclosing skew" in p.stdout
    assert "leaf skew" in svg and "enclosing skew" in svg


def test_enclosing_skew_carries_the_cost_between_events(opskew, tmp_path):
    """Issue 13: sweep said the minimal profiler's operator time was x0.98 of
    true while check said SKEWED: most of W falls between events, outside the
    leaf's interval. The annotation around the calls encloses it: under
    record_shapes+with_stack at one element its skew exceeds 1 and the leaf's."""
    js = tmp_path / "e.json"
    p = opskew("sweep", "--op", "add", "--sizes", "1", *SEEN, "--instrument", "torch:record_shapes,with_stack",
               "--no-plot", "--json", str(js))
    assert p.returncode == 0, p.stderr
    (pt,) = json.loads(js.read_text())["curves"][0]["points"]
    (d,) = pt["by"].values()
    # The only trace is the reference: its leaf skew is not a measurement (it was x1.00 [1.00, 1.00]).
    assert "reported_over_op" not in d and "x1.00 [1.00, 1.00]" not in p.stdout
    assert d["enclosing"]["skew"] > 1.0
    assert d["enclosing"]["reported_s"] > d["reported_per_call_s"] * pt["calls_per_trial"]


def _user_ops(tmp_path):
    f = tmp_path / "ops.py"
    f.write_text(
        "import torch\n"
        "def no_size():\n"
        "    return lambda: None\n"
        "def needs_args(n):\n"
        "    return lambda x: x\n"
        "def breaks_at_64(n):\n"
        "    x = torch.ones(n)\n"
        "    if n >= 64:\n"
        "        raise ValueError('too big for me')\n"
        "    return lambda: torch.relu(x)\n"
        "def call_breaks(n):\n"
        "    x = torch.ones(n)\n"
        "    def call():\n"
        "        if n >= 64:\n"
        "            raise RuntimeError('the call broke')\n"
        "        return torch.relu(x)\n"
        "    return call\n")
    return f


def test_user_op_with_a_wrong_signature_is_refused_before_running(opskew, tmp_path):
    f = _user_ops(tmp_path)
    p = opskew("sweep", "--op", f"{f}:no_size", "--sizes", "1", *FAST, "--no-plot")
    assert p.returncode == 2, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "no_size(size)" in lines[0] and "Traceback" not in p.stderr
    assert "size" not in p.stdout  # nothing measured
    p = opskew("sweep", "--op", f"{f}:needs_args", "--sizes", "1", *FAST, "--no-plot")
    assert p.returncode == 2, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "called with no argument" in lines[0] and "Traceback" not in p.stderr


@pytest.mark.parametrize("fn,message", [("breaks_at_64", "too big for me"), ("call_breaks", "the call broke")])
def test_user_op_that_raises_exits_4_with_its_own_frames(opskew, tmp_path, fn, message):
    f = _user_ops(tmp_path)
    js = tmp_path / "r.json"
    p = opskew("sweep", "--op", f"{f}:{fn}", "--sizes", "1,64", *FAST, "--instrument", "torch", "--no-plot",
               "--json", str(js))
    assert p.returncode == 4, (p.stdout, p.stderr)
    # The user's frames as Python prints them, none of opskew's, then one line.
    assert p.stderr.startswith("Traceback (most recent call last):\n")
    assert str(f) in p.stderr and message in p.stderr
    assert "opskew/commands" not in p.stderr and "opskew/measure" not in p.stderr
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("opskew sweep: --op") and message in last and "size 64" in last
    # What was measured before it is reported.
    r = json.loads(js.read_text())
    assert r["status"] == "workload-error" and [pt["size"] for pt in r["curves"][0]["points"]] == [1]
    assert any(ln.split()[:1] == ["1"] for ln in p.stdout.splitlines())  # the size-1 row


def _synthetic(instruments, added):
    """A sweep result with one curve whose added cost per call is `added`
    (per instrument, per size), for the plot and the printing alone."""
    pts = []
    for k, size in enumerate((1, 64, 4096)):
        by = {}
        for name in instruments:
            a = added[name][k]
            by[name] = {"events_per_call": 1, "profiled_per_call_s": 2e-6, "reported_per_call_s": 1e-6,
                        "added_per_event_ns": {"median": a * 1e9, "ci95": [a * 1e9 - 100, a * 1e9 + 100],
                                               "ci_coverage": 0.969, "ci_reaches_95": True, "n": 6},
                        "added_per_call_s": a, "added_per_call_ci95_s": [a - 1e-7, a + 1e-7],
                        "noisy": None, "reported_over_op": 1.1,
                        "enclosing": {"name": "opskew.sweep.calls", "reported_s": 3e-3, "true_s": 2e-3,
                                      "skew": 1.5}}
        pts.append({"size": size, "calls_per_trial": 1000, "true_per_call_s": 2e-6, "op_duration_s": 1e-6,
                    "op_duration_from": instruments[0], "by": by})
    curve = {"op": "add", "points": pts, "crossover": {n: {"vs_op_duration": None, "vs_whole_call": None}
                                                       for n in instruments}}
    from opskew.experiments.sweep import dropped

    curve["dropped_from_plot"] = dropped(curve)
    return {"conditions": {"torch": "t", "device": "cpu", "cpu": "c", "threads": 1, "trials": 6},
            "instruments": {n: f"label of {n}" for n in instruments}, "curves": [curve]}


def test_plot_colours_bands_and_dropped_points(tmp_path):
    """Issue 13: the same instrument had another colour in another plot; no
    CI bands; points <= 0 vanished from the log axis without a word."""
    import io

    from opskew.render.sweep import instrument_color, plot, print_human

    one = _synthetic(["torch", "opskew"], {"torch": [1e-6, -2e-7, 5e-7], "opskew": [2e-7, 2e-7, 2e-7]})
    two = _synthetic(["torch:record_shapes,with_stack", "opskew"],
                     {"torch:record_shapes,with_stack": [3e-6, 2e-6, 1e-6], "opskew": [2e-7, 2e-7, 2e-7]})
    svgs = []
    for k, res in enumerate((one, two)):
        res["plots"] = plot(res, str(tmp_path / f"p{k}"))
        svgs.append((tmp_path / f"p{k}.svg").read_text())
    green = instrument_color("opskew")
    assert green == instrument_color("opskew") and len({instrument_color(n) for n in
                                                        ("torch", "opskew", "opskew-native",
                                                         "torch:record_shapes,with_stack")}) == 4
    for svg in svgs:
        assert green in svg  # opskew in its colour in both plots, whatever came first
    assert instrument_color("torch") in svgs[0] and instrument_color("torch") not in svgs[1]
    assert "CI of the added cost" in svgs[0]
    assert "not drawn on the log axis" in svgs[0] and "not drawn on the log axis" not in svgs[1]
    buf = io.StringIO()
    print_human(one, buf)
    assert "plot: sizes 64 not drawn (added cost <= 0 on a log axis)" in buf.getvalue()
    assert "96.9% CI of W" in buf.getvalue()


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
