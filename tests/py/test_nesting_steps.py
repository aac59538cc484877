"""Issue 35: under with_stack the step boundary runs inside the Python frame
around optimizer.step(), which starts in ProfilerStep#N and ends in #N+1.
The nesting rule (osk__nest_push) keeps the step open: the frame nests in it,
clipped at its end, so the optimizer's operators count as the step's, and the
corrected trace writes each step at its formula, as the summary of that trace
reads it back."""

import json

import pytest

from opskew.analyze import tracefile as tf

from opskew.stats.costmodel import CostModel

STEPS = 3
MM, ADD = 10, 40  # forward/backward operators, optimizer operators per step


def _x(name, cat, ts, dur):
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur}


def _trace(path):
    """Three 400 us steps; each holds 10 aten::mm and the optimizer's
    Python frame, which starts at +150 us and ends 12 us into the next step
    (or past the last one), holding 40 aten::add_ (all inside the step)."""
    ev = [_x("train.py(1): <module>", "python_function", 0, 2000)]
    for n in range(1, STEPS + 1):
        t0 = 100 + 410 * (n - 1)
        ev.append(_x(f"ProfilerStep#{n}", "user_annotation", t0, 400))
        ev += [_x("aten::mm", "cpu_op", t0 + 10 + 12 * i, 10) for i in range(MM)]
        ev.append(_x("optimizer.py(1): wrapper", "python_function", t0 + 150, 262))
        ev += [_x("aten::add_", "cpu_op", t0 + 155 + 5 * i, 3) for i in range(ADD)]
    with open(path, "w") as f:
        json.dump({"traceEvents": ev}, f)


def _steps(doc):
    return {e["name"]: e for e in doc["traceEvents"]
            if e.get("ph") == "X" and e.get("name", "").startswith("ProfilerStep#")}


@pytest.mark.parametrize("w_py_ns", [0.0, 200.0])
def test_optimizer_frame_stays_in_its_step(tmp_path, w_py_ns):
    src, out = str(tmp_path / "t.json"), str(tmp_path / "t.corrected.json")
    _trace(src)
    # (a) every step holds its operators: the 10 mm, the frame and its 40
    # add_ (the frame used to close the step at its start: 10).
    s = {o["name"]: o for o in tf.summarize(src)["ops"]}
    for n in range(1, STEPS + 1):
        assert s[f"ProfilerStep#{n}"]["descendants"] == MM + 1 + ADD
    r = tf.correct(src, CostModel.default(1000.0, 0.0, w_py_ns), out=out)
    table = {o["name"]: o for o in r["ops"]}
    with open(out) as f:
        steps = _steps(json.load(f))
    assert len(steps) == STEPS
    for name, e in steps.items():
        row = table[name]
        assert e["args"]["descendants"] == MM + ADD and e["args"]["py_descendants"] == 1
        assert row["corrected_total_ns"] == pytest.approx(400_000 - 1000.0 * (MM + ADD) - w_py_ns, abs=1e-6)
        # (b) written at the formula, to 1 ns of rounding
        assert abs(e["dur"] * 1e3 - row["corrected_total_ns"]) <= 1.0, (name, e["dur"], row)
    # (c) the summary of the corrected trace reads the table's self and
    # total back for every step
    back = {o["name"]: o for o in tf.summarize(out)["ops"]}
    for name in steps:
        row = table[name]
        assert abs(back[name]["total_ns"] - row["corrected_total_ns"]) <= 1.0, (name, back[name], row)
        assert abs(back[name]["self_ns"] - row["corrected_self_ns"]) <= 1.0, (name, back[name], row)
        assert back[name]["descendants"] == MM + ADD + 1
