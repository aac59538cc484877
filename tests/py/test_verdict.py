"""The per-operator verdict (opskew.verdict) on traces whose answer is known."""

import io
import json

import pytest

from conftest import NOISE_ATTEMPTS
from opskew.analyze import verdict
from opskew.render import verdict as render_verdict
from opskew.stats.costmodel import CostModel


def injected_trace(path, *, w_ns, delta_ns=0.0, parents=200, children=4, leaf_ns=1000, gap_ns=500,
                   other_leaves=200):
    """What an instrument costing W per event (delta of it inside the event,
    (W - delta)/2 before its begin and after its end, as the model has it)
    does to a known program: `parents` annotations opskew::parent, each with
    `children` aten::add of `leaf_ns` and `gap_ns` of the parent's own work
    before each child; then `other_leaves` top-level aten::mul of `leaf_ns`.
    Returns the true figures."""
    ev = []
    t = 0.0
    half = (w_ns - delta_ns) / 2

    def leaf(name):
        nonlocal t
        t += half
        ev.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": t / 1e3,
                   "dur": (leaf_ns + delta_ns) / 1e3})
        t += leaf_ns + delta_ns + half

    for _ in range(parents):
        t += half
        start = t
        t += delta_ns
        for _ in range(children):
            t += gap_ns
            leaf("aten::add")
        ev.append({"ph": "X", "cat": "user_annotation", "name": "opskew::parent", "pid": 1, "tid": 1,
                   "ts": start / 1e3, "dur": (t - start) / 1e3})
        t += half + 300
    for _ in range(other_leaves):
        leaf("aten::mul")
    path.write_text(json.dumps({"traceEvents": ev}))
    return {"parent_total": children * (gap_ns + leaf_ns), "parent_self": children * gap_ns, "leaf": leaf_ns}


def by_name(v):
    return {r["name"]: r for r in v["ops"]}


def test_busy_wait_around_one_operators_children_marks_parent_inflated_leaves_believable(tmp_path):
    trace = tmp_path / "t.json"
    true = injected_trace(trace, w_ns=300.0)
    v = verdict.per_operator(str(trace), CostModel.default({"median": 300.0, "ci95": [290.0, 310.0]}, 0.0))
    ops = by_name(v)
    parent, add, mul = ops["opskew::parent"], ops["aten::add"], ops["aten::mul"]
    assert parent["mark"] == "inflated" and parent["marks"]["self"] == "inflated"
    assert add["mark"] == "believable" and mul["mark"] == "believable"
    # The corrected values are the true ones, and W's CI brackets them.
    assert parent["corrected_total_ns"]["median"] == pytest.approx(200 * true["parent_total"], rel=1e-6)
    lo, hi = parent["corrected_total_ns"]["ci95"]
    assert lo < 200 * true["parent_total"] < hi
    assert parent["corrected_self_ns"]["median"] == pytest.approx(200 * true["parent_self"], rel=1e-6)
    assert add["corrected_total_ns"]["median"] == pytest.approx(800 * true["leaf"], rel=1e-6)
    assert parent["added_ns"]["operators_below"] == pytest.approx(300.0 * 4 * 200)
    # Where the skew lands: all of it between events, none in the leaves.
    s = v["summary"]
    assert s["in_leaves_ns"] == 0 and s["leaf_inflation"] == pytest.approx(0, abs=1e-9)
    assert s["most_inflated_parent"]["name"] == "opskew::parent"
    # W per event over 1200 events (200 parents, 800 adds inside them, 200
    # top-level muls): the adds' W lies inside the parents, the parents'
    # and the muls' own W between top-level events.
    assert s["added_ns"] == pytest.approx(300.0 * 1200)
    assert s["in_parents_ns"] == pytest.approx(300.0 * 800)
    assert s["between_top_level_ns"] == pytest.approx(300.0 * 400)
    text = render_verdict.sentence(s)
    assert "0% lies inside leaf operators" in text and "opskew::parent" in text
    assert "67% inside parents" in text and "33% between top-level events" in text


def test_delta_inside_the_leaves_inflates_them(tmp_path):
    trace = tmp_path / "t.json"
    injected_trace(trace, w_ns=600.0, delta_ns=400.0)  # leaves read 1400 ns for 1000
    v = verdict.per_operator(str(trace), CostModel.default({"median": 600.0, "ci95": [590.0, 610.0]}, 400.0))
    ops = by_name(v)
    assert ops["aten::add"]["mark"] == "inflated" and ops["aten::mul"]["mark"] == "inflated"
    assert ops["aten::mul"]["corrected_total_ns"]["median"] == pytest.approx(200 * 1000, rel=1e-6)
    assert v["summary"]["leaf_inflation"] == pytest.approx(0.4, rel=1e-3)



def test_delta_s_spread_over_operators_widens_the_intervals_only(tmp_path):
    """delta is one number for every operator, while what the instrument adds
    inside an operator depends on the operator: with its spread over the
    calibration's panel, the intervals take delta at the spread's ends (the
    low end with W's upper end), the medians stay."""
    from opskew.calibration import store as calibration

    trace = tmp_path / "t.json"
    injected_trace(trace, w_ns=600.0, delta_ns=100.0)
    w = {"median": 600.0, "ci95": [590.0, 610.0]}
    plain = by_name(verdict.per_operator(str(trace), CostModel.default(w, 100.0)))
    v = verdict.per_operator(str(trace), CostModel.default(w, 100.0), delta_range=[20.0, 350.0])
    wide = by_name(v)
    assert v["delta_range_ns"] == [20.0, 350.0]
    for name in ("aten::add", "aten::mul"):
        p, q = plain[name]["corrected_total_ns"], wide[name]["corrected_total_ns"]
        calls = wide[name]["calls"]
        # Each correction writes its trace for float64 readers: a leaf whose end
        # would read crossed loses 1 to 3 ns (docs/outputs.md, "Read as float64").
        f64 = 3.0 * calls
        assert q["median"] == pytest.approx(p["median"], abs=f64)
        assert p["ci95"][0] == pytest.approx(p["median"], abs=f64)  # a leaf: W's CI moves nothing
        assert q["ci95"][0] == pytest.approx(p["median"] - 250.0 * calls, abs=f64)
        assert q["ci95"][1] == pytest.approx(p["median"] + 80.0 * calls, abs=f64)
    # The range is clamped to hold delta, and into [0, W] at each end.
    v = verdict.per_operator(str(trace), CostModel.default(w, 100.0), delta_range=[150.0, 900.0])
    assert v["delta_range_ns"] == [100.0, 900.0]
    q = by_name(v)["aten::mul"]["corrected_total_ns"]
    calls = by_name(v)["aten::mul"]["calls"]
    assert q["ci95"][0] == pytest.approx(q["median"] - (610.0 - 100.0) * calls, abs=3.0 * calls)
    for bad in ([1.0], [3.0, 2.0], [float("nan"), 1.0], "12", [True, 2.0]):
        with pytest.raises(ValueError, match="delta_range"):
            verdict.per_operator(str(trace), CostModel.default(w, 100.0), delta_range=bad)
    # What a stored calibration says: two finite numbers >= 0, lo <= hi, or nothing.
    assert calibration.delta_range({"delta_ns": {"median": 5.0, "range": [1, 9]}}) == [1.0, 9.0]
    for rng in (None, [1.0], [9.0, 1.0], [-1.0, 2.0], [1.0, float("inf")], ["1", 2]):
        assert calibration.delta_range({"delta_ns": {"median": 5.0, "range": rng}}) is None
    assert calibration.delta_range(None) is None and calibration.delta_range({}) is None


def test_a_name_s_own_delta_replaces_delta_for_its_events_only(tmp_path):
    """op_deltas (opskew.profile's leaves against its tracer): aten::add's
    events take their own delta, 300 at the median, its interval's ends
    at W's ends; aten::mul and the parents keep delta and the range. Up to
    W, W per event is unchanged, so a parent's corrected time is too."""
    trace = tmp_path / "t.json"
    injected_trace(trace, w_ns=600.0, delta_ns=100.0)
    w = {"median": 600.0, "ci95": [590.0, 610.0]}
    plain = by_name(verdict.per_operator(str(trace), CostModel.default(w, 100.0), delta_range=[20.0, 350.0]))
    own = {"aten::add": {"median": 300.0, "ci95": [250.0, 340.0], "source": "in-run"}}
    v = verdict.per_operator(str(trace), CostModel.default(w, 100.0), delta_range=[20.0, 350.0], op_deltas=own)
    ops = by_name(v)
    add, calls = ops["aten::add"], ops["aten::add"]["calls"]
    assert add["corrected_total_ns"]["median"] == pytest.approx(add["reported_total_ns"] - 300.0 * calls, rel=1e-9)
    assert add["corrected_total_ns"]["ci95"] == pytest.approx([add["reported_total_ns"] - 340.0 * calls,
                                                               add["reported_total_ns"] - 250.0 * calls], rel=1e-9)
    assert add["delta_ns"] == {"median": 300.0, "ci95": [250.0, 340.0], "source": "in-run"}
    assert add["added_ns"]["inside"] == pytest.approx(300.0 * calls)
    for name in ("aten::mul", "opskew::parent"):
        for k in ("median", "ci95"):
            assert ops[name]["corrected_total_ns"][k] == pytest.approx(plain[name]["corrected_total_ns"][k])
        assert "delta_ns" not in ops[name]
    # The share inside the leaves counts add's own delta.
    mul = ops["aten::mul"]
    assert v["summary"]["in_leaves_ns"] == pytest.approx(300.0 * calls + 100.0 * mul["calls"])
    # Not clamped to W (the mean over all events): 700 and 900 are taken
    # out of aten::add, and add's W is raised to them, so the parent loses
    # 700 per add at the median, not W. Its self time no longer holds the
    # (W - delta) per add that the plain correction took out on add's
    # sides (now all inside add), and never grows above what it reported.
    v = verdict.per_operator(str(trace), CostModel.default(w, 100.0),
                             op_deltas={"aten::add": {"median": 700.0, "ci95": [700.0, 900.0]}})
    add, parent = by_name(v)["aten::add"], by_name(v)["opskew::parent"]
    assert add["corrected_total_ns"]["median"] == pytest.approx(add["reported_total_ns"] - 700.0 * calls, rel=1e-9)
    assert add["corrected_total_ns"]["ci95"][0] == pytest.approx(add["reported_total_ns"] - 900.0 * calls, rel=1e-9)
    assert add["delta_ns"]["median"] == 700.0
    assert parent["added_ns"]["scaled"] == pytest.approx((700.0 - 600.0) * calls)
    assert parent["corrected_total_ns"]["median"] == pytest.approx(
        plain["opskew::parent"]["corrected_total_ns"]["median"] - (700.0 - 600.0) * calls)
    assert parent["corrected_self_ns"]["median"] == pytest.approx(
        plain["opskew::parent"]["corrected_self_ns"]["median"] + (600.0 - 100.0) * calls, abs=1.0)
    assert parent["corrected_self_ns"]["median"] <= parent["reported_self_ns"]
    for bad in ({"aten::add": {"median": -1.0, "ci95": [0.0, 1.0]}}, {"aten::add": {"median": 5.0, "ci95": [6.0, 9.0]}},
                {"aten::add": {"median": float("nan"), "ci95": [0.0, 1.0]}}, {"aten::add": 5.0},
                {"aten::add": {"median": 5.0}}):
        with pytest.raises(ValueError, match="op_deltas"):
            verdict.per_operator(str(trace), CostModel.default(w, 100.0), op_deltas=bad)
    with pytest.raises(TypeError, match="op_deltas"):
        verdict.per_operator(str(trace), CostModel.default(w, 100.0), op_deltas=[1.0])


def test_a_name_faster_in_the_trace_than_in_the_reference_reaches_it_and_is_unknowable(tmp_path):
    """op_deltas' below_ns: the name ran that much less per call in the
    trace than under the reference, beyond doubt, so no cost is taken out of
    it (own delta 0) and its intervals' high ends reach the reference's time:
    "unknowable", whatever W says; the other names are as before."""
    trace = tmp_path / "t.json"
    injected_trace(trace, w_ns=600.0, delta_ns=100.0)
    w = {"median": 600.0, "ci95": [590.0, 610.0]}
    plain = by_name(verdict.per_operator(str(trace), CostModel.default(w, 100.0)))
    below = {"median": 2000.0, "ci95": [1500.0, 2500.0], "tracer_ns": 9000.0}
    own = {"aten::add": {"median": 0.0, "ci95": [0.0, 0.0], "below_ns": below}}
    ops = by_name(verdict.per_operator(str(trace), CostModel.default(w, 100.0), op_deltas=own))
    add, calls = ops["aten::add"], ops["aten::add"]["calls"]
    f64 = 3.0 * calls  # what the float64 rule may take from a leaf (docs/outputs.md)
    assert add["corrected_total_ns"]["median"] == pytest.approx(add["reported_total_ns"], abs=f64)
    assert add["corrected_total_ns"]["ci95"][1] == pytest.approx(add["reported_total_ns"] + 2500.0 * calls, abs=f64)
    assert add["corrected_self_ns"]["ci95"][1] == pytest.approx(add["corrected_self_ns"]["median"] + 2500.0 * calls,
                                                                abs=f64)
    assert add["below_tracer_ns"]["ci95"] == [1500.0, 2500.0] and add["below_tracer_ns"]["tracer_ns"] == 9000.0
    assert add["mark"] == "unknowable" and plain["aten::add"]["mark"] != "unknowable"
    assert "below_tracer_ns" not in ops["aten::mul"]
    assert ops["aten::mul"]["corrected_total_ns"] == plain["aten::mul"]["corrected_total_ns"]
    for bad in ({"median": -5.0, "ci95": [1.0, 2.0]}, {"median": 5.0, "ci95": [6.0, 9.0]}, {"median": 5.0},
                {"median": 0.0, "ci95": [0.0, 0.0]}, 7.0):
        with pytest.raises(ValueError, match="below_ns"):
            verdict.per_operator(str(trace), CostModel.default(w, 100.0),
                                 op_deltas={"aten::add": {"median": 0.0, "ci95": [0.0, 0.0], "below_ns": bad}})

def test_a_correction_larger_than_what_remains_is_unknowable(tmp_path):
    trace = tmp_path / "t.json"
    injected_trace(trace, w_ns=3000.0, leaf_ns=200, gap_ns=100)
    v = verdict.per_operator(str(trace), CostModel.default({"median": 3000.0, "ci95": [2900.0, 3100.0]}, 0.0))
    ops = by_name(v)
    assert ops["opskew::parent"]["mark"] == "unknowable"
    assert ops["aten::add"]["mark"] == "believable"  # delta = 0: the leaves' own intervals are clean
    # The parent's corrected total is clamped at 0: no finite inflation. It was math.inf, written as
    # Infinity in check --json (which compare and every JSON reader refused) and "+inf%" in the text.
    v = verdict.per_operator(str(trace), CostModel.default({"median": 1e6, "ci95": [0.9e6, 1.1e6]}, 0.0))  # all of it clamped
    worst = v["summary"]["most_inflated_parent"]
    assert worst["name"] == "opskew::parent" and worst["inflation"] is None
    json.dumps(v, allow_nan=False)
    assert "inf%" not in render_verdict.sentence(v["summary"]) and "its corrected total is 0" in render_verdict.sentence(v["summary"])


def test_an_uncertain_w_calls_nothing_inflated_nor_believable_where_it_cannot_tell(tmp_path):
    """A W whose CI reaches zero cannot prove a parent inflated, nor bound
    what it added: "unresolved", counted apart; the leaves, with nothing
    inside them at any W, stay believable."""
    trace = tmp_path / "t.json"
    injected_trace(trace, w_ns=30.0)
    v = verdict.per_operator(str(trace), CostModel.default({"median": 30.0, "ci95": [0.0, 400.0]}, 0.0))
    ops = by_name(v)
    assert ops["opskew::parent"]["mark"] == "unresolved"
    assert ops["aten::add"]["mark"] == ops["aten::mul"]["mark"] == "believable"
    assert v["marks"] == {"believable": 2, "inflated": 0, "unresolved": 1, "unknowable": 0}


@pytest.mark.parametrize(("reported", "med", "lo", "hi", "mark"), [
    (100.0, 99.0, 98.0, 100.0, "believable"),   # at most 2% added: checked, and small
    (100.0, 99.0, 60.0, 100.0, "unresolved"),   # 1% at the median, but up to 67% at W's upper end
    (100.0, 70.0, 65.0, 90.0, "inflated"),      # the whole interval lies below the reported time
    (100.0, 80.0, 70.0, 99.0, "unresolved"),    # 25% at the median, the interval reaches the reported
    (100.0, 40.0, 30.0, 50.0, "unknowable"),    # more than half of it is instrument
    (100.0, 60.0, 0.0, 90.0, "unknowable"),     # the interval reaches zero
    (0.0, 0.0, 0.0, 0.0, "believable"),         # nothing reported, nothing to doubt
])
def test_believable_only_where_the_interval_bounds_what_was_added(reported, med, lo, hi, mark):
    assert verdict.trust_mark(reported, med, lo, hi, 0.05) == mark


def test_one_sentence_reconciles_the_step_s_verdict_with_the_operators():
    """The first check of a newcomer: SKEWED, and its one row believable
    with nothing added. The sentence says the cost lies between operators
    and which times to read; with other marks, what each asks."""
    from opskew.render.verdict import reconcile

    text = reconcile(True, 1.31, {"believable": 1, "inflated": 0, "unresolved": 0, "unknowable": 0}, "step")
    assert text.startswith("skewed between operators: the step is 31% longer profiled while each operator's own "
                           "time is right") and "read operator times, not the step's" in text
    text = reconcile(True, 1.2, {"believable": 3, "inflated": 2, "unresolved": 1})
    assert "2 inflated: read their corrected times" in text and "1 unresolved" in text
    assert "torch.profiler.schedule(skip_first=10, wait=21" in text and "the 3 believable read as reported" in text
    assert reconcile(False, 1.0, {"believable": 4}).startswith("no skew in the step")
    assert reconcile(True, 1.2, {}) is None
    assert "the iteration is 20% longer" in reconcile(True, 1.2, {"believable": 1}, "iteration")


def test_render_prints_a_row_per_operator_and_the_sentence(tmp_path):
    trace = tmp_path / "t.json"
    injected_trace(trace, w_ns=300.0)
    v = verdict.per_operator(str(trace), CostModel.default({"median": 300.0, "ci95": [290.0, 310.0]}, 0.0))
    out = io.StringIO()
    render_verdict.render(v, out, top=2)
    text = out.getvalue()
    assert text.count("\n") == 2 + 2 + 1 + 1  # header, rule, 2 rows, "more", sentence
    assert "... 1 more (--top 0 shows all)" in text and "where the skew lands:" in text
    assert "inflated" in text


def test_a_bytecode_slowdown_widens_only_the_rows_whose_self_time_runs_python(tmp_path):
    """Under with_stack on CPython <= 3.11 the interpreter runs bytecode
    slower while the profile function is set; opskew.bytecode measures the
    factor and the verdict lowers the interval's low end of the names whose
    self time runs Python code (record_function ranges, Python frames) by
    it, and of no operator's."""
    trace = tmp_path / "t.json"
    injected_trace(trace, w_ns=300.0)
    w = {"median": 300.0, "ci95": [290.0, 310.0]}
    plain = by_name(verdict.per_operator(str(trace), CostModel.default(w, 0.0)))
    slow = {"factor": {"median": 2.0, "ci95": [1.9, 2.1]}, "applies": True, "python": "CPython 3.11.7"}
    v = verdict.per_operator(str(trace), CostModel.default(w, 0.0), bytecode=slow)
    ops = by_name(v)
    parent, add, mul = ops["opskew::parent"], ops["aten::add"], ops["aten::mul"]
    assert parent["category"] == "user_annotation" and add["category"] == "cpu_op"
    assert parent["bytecode_factor"] == 2.0 and "bytecode_factor" not in add and "bytecode_factor" not in mul
    assert v["bytecode_rows"] == 1
    lo_self = plain["opskew::parent"]["corrected_self_ns"]["ci95"][0]
    assert parent["corrected_self_ns"]["ci95"][0] == pytest.approx(lo_self / 2)
    assert parent["corrected_total_ns"]["ci95"][0] == pytest.approx(
        plain["opskew::parent"]["corrected_total_ns"]["ci95"][0] - lo_self / 2)
    # The medians, the high ends and the operators' intervals stay.
    for name in ops:
        for fig in ("corrected_self_ns", "corrected_total_ns"):
            assert ops[name][fig]["median"] == plain[name][fig]["median"]
            assert ops[name][fig]["ci95"][1] == plain[name][fig]["ci95"][1]
    for name in ("aten::add", "aten::mul"):
        assert ops[name]["corrected_self_ns"] == plain[name]["corrected_self_ns"]
    out = io.StringIO()
    render_verdict.render(v, out, top=0)
    assert "opskew::parent" in out.getvalue() and "* 1 name(s) whose self time runs Python code" in out.getvalue()
    # A factor whose CI does not lie above 1 (Python 3.12's instrumentation)
    # widens nothing.
    flat = dict(slow, applies=False)
    assert by_name(verdict.per_operator(str(trace), CostModel.default(w, 0.0), bytecode=flat)) == plain
    # A factor that is no number above 1 widens nothing; a bytecode that is no dict is refused.
    for bad in (None, float("nan"), 0.5, "2"):
        odd = dict(slow, factor={"median": bad, "ci95": [1.9, 2.1]})
        assert by_name(verdict.per_operator(str(trace), CostModel.default(w, 0.0), bytecode=odd)) == plain
    with pytest.raises(TypeError, match="bytecode must be"):
        verdict.per_operator(str(trace), CostModel.default(w, 0.0), bytecode=2.0)
    out = io.StringIO()
    render_verdict.render(verdict.per_operator(str(trace), CostModel.default(w, 0.0), bytecode=flat), out, top=0)
    assert "name(s) whose self time" not in out.getvalue()


def test_bytecode_measure_keeps_another_profile_function_and_reports_its_conditions():
    import sys

    from opskew.measure import bytecode

    seen = []

    def other(frame, event, arg):
        seen.append(event)

    sys.setprofile(other)
    try:
        assert bytecode.measure(rounds=3) is None  # never replaces a profile function in use
        assert sys.getprofile() is other
    finally:
        sys.setprofile(None)
    m = bytecode.measure(rounds=11, n=100, reps=3)
    assert sys.getprofile() is None
    assert m["rounds"] == 11 and m["python"].startswith(("CPython", "PyPy")) and m["measure"]
    f = m["factor"]
    assert f["median"] > 0 and (f["ci95"] is None or f["ci95"][0] <= f["median"] <= f["ci95"][1])
    assert m["applies"] == bool(f["ci95"] and f["ci95"][0] > bytecode.MIN_FACTOR)
    assert (m["why"] is None) == m["applies"]


WL = __import__("os").path.join(__import__("os").path.dirname(__file__), "workloads", "wl.py")


def test_check_marks_the_parent_of_an_injected_cost_inflated_and_its_children_believable(check_json, tmp_path):
    """End to end on real torch: a busy-wait runs only while the profiler
    records, only before each child of opskew::parent (outside the
    children's intervals). check's per-operator verdict marks the parent
    inflated and its aten::add children believable, and says the skew lands
    between events."""
    plot = tmp_path / "v.svg"
    # Retried as conftest.until says: "inflated" needs W's CI to
    # exclude small values, and a shared machine can disturb enough pairs of
    # one run to widen it. The children's mark does not depend on W.
    for attempt in range(NOISE_ATTEMPTS):
        p, r = check_json(f"{WL}:injected_children", "--setup", "injected_setup", "--trials", "15",
                          "--iters", "10", "--warmup", "0.1", "--plot", str(plot))
        ops = {o["name"]: o for o in r["operators"]["ops"]}
        parent, mm = ops["opskew::parent"], ops["aten::add"]
        assert mm["mark"] == "believable", mm
        if parent["mark"] == "inflated":
            break
    assert parent["mark"] == "inflated", (parent, r["added_per_event_ns"])
    assert mm["mark"] == "believable", mm
    assert parent["added_ns"]["operators_below"] > 0 and mm["added_ns"]["operators_below"] == 0
    assert "per-operator verdict" in p.stdout and "where the skew lands" in p.stdout
    assert r["operators"]["summary"]["in_leaves_ns"] == 0  # no delta stored: nothing inside the leaves
    svg = plot.read_text()
    assert svg.lstrip().startswith("<?xml") and "opskew::parent" in svg


def test_check_without_the_verdict_window(check_json):
    p, r = check_json("--trials", "3", "--iters", "3", "--calls", "100", "--warmup", "0.05", "--no-verdict")
    assert "operators" not in r and "per-operator verdict" not in p.stdout


def test_the_three_corrections_give_the_same_verdict_one_after_another_and_side_by_side(tmp_path, monkeypatch):
    trace = tmp_path / "t.json"
    injected_trace(trace, w_ns=400.0, delta_ns=100.0)
    w = {"median": 400.0, "ci95": [300.0, 500.0]}
    runs = {}
    for cpus in (1, 3):
        monkeypatch.setattr(verdict, "usable_cpus", lambda cpus=cpus: cpus)
        out = tmp_path / f"c{cpus}.json"
        runs[cpus] = verdict.per_operator(str(trace), CostModel.default(w, 50.0), out=str(out), delta_range=[0.0, 100.0])
        assert json.loads(out.read_text())["traceEvents"]  # the median's correction wrote it, in either way
    assert runs[1]["ops"] == runs[3]["ops"] and runs[1]["summary"] == runs[3]["summary"]
    ops = by_name(runs[3])
    # Each end of the interval is its own correction's: W's upper end gives the low end.
    assert ops["opskew::parent"]["corrected_total_ns"]["ci95"][0] < ops["opskew::parent"]["corrected_total_ns"]["median"]
    assert ops["opskew::parent"]["corrected_total_ns"]["median"] < ops["opskew::parent"]["corrected_total_ns"]["ci95"][1]
    assert (tmp_path / "c1.json").read_bytes() == (tmp_path / "c3.json").read_bytes()


def test_side_by_side_keeps_call_order_and_raises_the_first_failure_after_all_ended(monkeypatch):
    import threading
    import time

    monkeypatch.setattr(verdict, "usable_cpus", lambda: 3)
    threads = set()

    def slow(x, wait=0.0):
        def f():
            threads.add(threading.get_ident())
            time.sleep(wait)
            return x
        return f

    assert verdict._side_by_side(slow("a", 0.05), slow("b"), slow("c", 0.02)) == ["a", "b", "c"]
    assert len(threads) >= 2 and threading.get_ident() not in threads  # in threads of their own
    ended = []

    def boom(msg, wait):
        def f():
            time.sleep(wait)
            ended.append(msg)
            raise ValueError(msg)
        return f

    def last():
        time.sleep(0.05)
        ended.append("last")
        return 1

    with pytest.raises(ValueError, match="second"):
        verdict._side_by_side(slow("a"), boom("second", 0.03), boom("third", 0.0), last)
    assert sorted(ended) == ["last", "second", "third"]  # every call ended before the raise
    monkeypatch.setattr(verdict, "usable_cpus", lambda: 1)
    threads.clear()
    assert verdict._side_by_side(slow("x"), slow("y")) == ["x", "y"]
    assert threads == {threading.get_ident()}  # one after another, in the caller's thread


def test_usable_cpus_is_the_affinity_mask():
    import os

    want = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    assert verdict.usable_cpus() == want >= 1


def test_an_own_delta_far_above_w_is_refused_as_noise():
    """The leaf reference (opskew.profile's leaves against its tracer): an
    own delta above REF_REFUSE_W x W is a stall in the traced steps, not
    instrument (taken, it raised that operator's W and every step around it
    lost it: a step corrected to a sixth of its unprofiled wait steps). It
    is refused, said in the report with the limit, and that name keeps the
    class's delta; one a little above W is kept (above_w)."""
    from opskew.profiler.leafref import REF_REFUSE_W, LeafReference
    from opskew.render.profile import _details

    ref = LeafReference(True, False)
    w = 500.0
    # Under the tracer each takes 1 us a call, on 6 tracer steps.
    ref.steps = [{"aten::add": 1000.0 + k, "aten::addcdiv_": 1000.0 + k, "aten::mul": 1000.0 + k} for k in range(6)]
    # In the trace: add 300 ns more a call, mul 700 (above W), addcdiv_ 97 us (a stall).
    leaves = {"aten::add": (10, 13_000.0, 0), "aten::mul": (10, 17_000.0, 0), "aten::addcdiv_": (10, 980_000.0, 0)}
    out, info = ref.op_deltas(leaves, CostModel.default(w))
    assert set(out) == {"aten::add", "aten::mul"} and info["above_w"] == ["aten::mul"]
    assert info["refused"]["names"] == ["aten::addcdiv_"] and info["refused"]["limit_ns"] == REF_REFUSE_W * w
    assert 96_000 < info["refused"]["median_ns"] < 98_000
    lines = []
    _details(lines, {"leaf_delta": info, "delta_ns": 0.0}, set())
    text = "\n".join(lines)
    assert "leaf delta refused as noise for 1 name(s)" in text and "aten::addcdiv_" in text
    # Only noise of its own: nothing refused at W <= 0 (no scale to judge by).
    out, info = ref.op_deltas(leaves, CostModel.default(0.0))
    assert "aten::addcdiv_" in out and "refused" not in info
