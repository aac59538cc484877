"""The cost model (issue 41, item 2; opskew.stats.costmodel): any number of
classes in C and in Python; today's two (operators and record_function
ranges at W, Python calls at W_py) are two entries of it with the results
the named fields gave; a new class is a row of CLASSES and its price."""

import json

import pytest

torch = pytest.importorskip("torch")

from opskew import _correct  # noqa: E402
from opskew.analyze import tracefile as tf  # noqa: E402
from opskew.analyze import verdict  # noqa: E402
from opskew.stats.costmodel import CLASSES, MAX_CLASSES, CostClass, CostModel, separability  # noqa: E402

W, D, W_PY, D_PY = 800.0, 60.0, 300.0, 20.0


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    """A transformer step with a record_function range, under
    record_shapes+with_stack and a schedule (ProfilerStep#N ranges): every
    class of a torch.profiler trace's corrected events."""
    torch.manual_seed(0)
    tfm = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(16, 2, dim_feedforward=32), num_layers=1)
    opt = torch.optim.AdamW(tfm.parameters())
    x = torch.randn(4, 2, 16)
    path = str(tmp_path_factory.mktemp("costmodel") / "t.json")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True,
                                with_stack=True, schedule=torch.profiler.schedule(wait=0, warmup=1, active=2),
                                on_trace_ready=lambda p: p.export_chrome_trace(path)) as p:
        for _ in range(3):
            with torch.profiler.record_function("forward"):
                y = tfm(x)
            y.mean().backward()
            opt.step()
            opt.zero_grad()
            p.step()
    return path


def events(path):
    with open(path) as f:
        return [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]


def test_the_two_default_classes_give_what_the_named_fields_gave(trace, tmp_path):
    """The C correction with W, delta, W_py, delta_py as named fields and
    with the model's two classes: the same corrected trace to the byte, the
    same table."""
    named = _correct.correct(trace, W, D, str(tmp_path / "named.json"), w_py_ns=W_PY, delta_py_ns=D_PY)
    model = CostModel.default(W, D, W_PY, D_PY)
    assert model.default_shape() and [c.name for c in model.classes] == ["operator", "python"]
    assert model.classes[0].categories == ("cpu_op", "user_annotation")
    mine = tf.correct(trace, model, str(tmp_path / "model.json"))
    assert (tmp_path / "named.json").read_bytes() == (tmp_path / "model.json").read_bytes()
    assert named["ops"] == mine["ops"] and named["stats"] == mine["stats"]
    # Per class: the operators' then Python's, as the named fields count them.
    s = mine["stats"]
    assert s["class_events"] == [s["corrected_events"] - s["py_events"], s["py_events"]] and s["py_events"] > 0
    for o in mine["ops"]:
        assert o["class_descendants"] == [o["descendants"], o["py_descendants"]]
        assert o["cost_class"] == (1 if o["python"] else 0)


def test_a_class_of_its_own_is_a_data_change(trace, tmp_path):
    """record_function ranges priced apart (CLASSES without their
    `with_class`): at the operators' W the corrected times are the same as
    the default model's; at another W every event around a range loses
    that W for it, and the header and args say the model."""
    apart = tuple({k: v for k, v in r.items() if k not in ("with_class", "why")} for r in CLASSES)
    same = CostModel.of({"operator": W, "annotation": W, "python": W_PY}, {"operator": D, "annotation": D,
                                                                          "python": D_PY}, table=apart)
    assert [c.name for c in same.classes] == ["operator", "annotation", "python"] and not same.default_shape()
    base = tf.correct(trace, CostModel.default(W, D, W_PY, D_PY), str(tmp_path / "two.json"))
    three = tf.correct(trace, same, str(tmp_path / "three.json"))
    two_ev, three_ev = events(tmp_path / "two.json"), events(tmp_path / "three.json")
    # The same time line, but for the rounding of sums taken in another order (1 ns).
    assert [e["name"] for e in two_ev] == [e["name"] for e in three_ev]
    assert max(max(abs(a["ts"] - b["ts"]), abs(a["dur"] - b["dur"])) for a, b in zip(two_ev, three_ev)) <= 0.0015
    ann = sum(1 for e in events(trace) if e.get("cat") == "user_annotation")
    assert ann > 0 and three["stats"]["class_events"][1] == ann
    by = {o["name"]: o for o in three["ops"]}
    for o in base["ops"]:
        assert o["corrected_total_ns"] == pytest.approx(by[o["name"]]["corrected_total_ns"], abs=1e-6)
        # The named counts are the classes' sums; the ranges are their own class.
        assert by[o["name"]]["descendants"] == o["descendants"]
    assert by["forward"]["cost_class"] == 1 and sum(by["forward"]["class_descendants"]) == by["forward"][
        "descendants"] + by["forward"]["py_descendants"]
    header = json.load(open(tmp_path / "three.json"))["opskew"]["corrected"]
    assert [c["name"] for c in header["classes"]] == ["operator", "annotation", "python"]
    assert header["classes"][1]["categories"] == ["user_annotation"]
    cats = {c for k in same.classes for c in k.categories}
    assert all("class_descendants" in e["args"] for e in three_ev if e.get("cat") in cats)
    # A W of its own: each event around a range loses that W for it.
    dear = CostModel.of({"operator": W, "annotation": W + 5000.0, "python": W_PY},
                        {"operator": D, "annotation": D, "python": D_PY}, table=apart)
    v = tf.correct(trace, dear, str(tmp_path / "dear.json"))
    moved = 0
    for o in v["ops"]:
        was = by[o["name"]]
        n = o["class_descendants"][1]
        if n and not o["clamped"] and not was["clamped"] and o["stretched_ns"] == was["stretched_ns"] == 0:
            assert o["corrected_total_ns"] == pytest.approx(was["corrected_total_ns"] - 5000.0 * n, abs=2.0 * o["calls"])
            moved += 1
    assert moved > 0
    # The verdict takes the model too: its rows price each class's events.
    vv = verdict.per_operator(trace, dear)
    assert vv["cost_model"]["classes"][1]["w_ns"]["median"] == W + 5000.0
    step = next(r for r in vv["ops"] if r["name"].startswith("ProfilerStep#"))
    assert step["added_ns"]["operators_below"] > W * step["descendants_per_call"] * step["calls"]


def test_the_model_refuses_what_the_correction_cannot_take():
    one = CostClass("operator", ("cpu_op",), {"median": 1.0, "ci95": [1.0, 1.0]})
    with pytest.raises(ValueError, match="1 to"):
        CostModel(())
    with pytest.raises(ValueError, match="1 to"):
        CostModel(tuple(CostClass(f"c{i}", (f"cat{i}",), one.w) for i in range(MAX_CLASSES + 1)))
    with pytest.raises(ValueError, match="two classes"):
        CostModel((one, CostClass("other", ("cpu_op",), one.w)))
    with pytest.raises(ValueError, match="finite"):
        CostModel((CostClass("operator", ("cpu_op",), {"median": float("nan"), "ci95": [0.0, 1.0]}),))
    # The binding refuses what the C refuses.
    with pytest.raises(ValueError, match="1 to 4"):
        _correct.correct("/nonexistent", classes=[])
    bad = _correct.correct("/nonexistent", classes=[{"categories": ["cpu_op"], "w_ns": 1.0, "delta_ns": 2.0}])
    assert bad["status"] == "error" and bad["error"]["code"] == "OSK_EINVAL" and "cost classes" in bad["error"]["message"]


def test_which_classes_are_not_separable_comes_from_the_table():
    """The report's cost_classes: a class priced with another is named as
    not separable, with the table's reason."""
    out = separability({"with_stack": True, "record_shapes": True}, None)
    assert out["not_separable"] == ["per_operator_extras", "python_function", "user_annotation"]
    assert out["user_annotation"].endswith(next(r["why"] for r in CLASSES if r["name"] == "annotation"))
    measured = separability({"with_stack": True}, {"source": "measured"})
    assert measured["not_separable"] == ["user_annotation"] and "measured apart" in measured["python_function"]


def test_documents_name_each_class_s_price_in_one_place():
    """A document's named W and delta fields (a calibration, a report, a
    job's rank, --json) are read and written through prices and fields
    alone: one the inverse of the other, a class left out writes nothing,
    and the verdict's result carries its model's prices under them."""
    from opskew.stats.costmodel import FIELDS, fields, prices

    cal = {"key": {}, "w_ns": {"median": 700.0, "ci95": [600.0, 800.0]}, "delta_ns": {"median": 50.0},
           "w_py_ns": {"median": 300.0}, "delta_py_ns": {"median": 20.0}}
    got = prices(cal)
    assert list(got) == list(FIELDS) == ["operator", "python"]
    assert got["operator"] == (cal["w_ns"], cal["delta_ns"]) and got["python"] == (cal["w_py_ns"], cal["delta_py_ns"])
    assert fields(got) == {k: cal[k] for k in ("w_ns", "delta_ns", "w_py_ns", "delta_py_ns")}
    assert fields({"operator": (1.0, 0.5)}) == {"w_ns": 1.0, "delta_ns": 0.5}
    assert prices({})["python"] == (None, None)
    with pytest.raises(KeyError):
        fields({"memory": (1.0, 0.0)})  # a class no document names yet: FIELDS first


def test_the_verdict_writes_its_model_s_prices_under_the_document_fields(trace):
    from opskew.stats.costmodel import fields, prices

    model = CostModel.default({"median": 700.0, "ci95": [600.0, 800.0]}, 50.0, {"median": 300.0, "ci95": [250.0, 350.0]},
                              20.0)
    v = verdict.per_operator(trace, model)
    got = prices(v)
    assert got["operator"][0]["median"] == 700.0 and got["operator"][1] == 50.0
    assert got["python"][0]["median"] == 300.0 and got["python"][1] == 20.0
    assert set(fields(got)) <= set(v)
