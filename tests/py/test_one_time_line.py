"""Issue 35: one corrected time line, and every table read from it. The
table of `opskew correct` (and the report's per-operator rows of
opskew.profile, which come from the same pass) and `opskew summary` of the
corrected trace it wrote give the same self and total times per name, to the
nanosecond, on nested real traces: an LSTM, a transformer step with
record_shapes and with_stack (Python frames, record_function ranges,
improper overlaps). docs/correct.md, "One time line"."""

import io

import pytest

from opskew.analyze import tracefile as tf
from opskew.analyze import verdict
from opskew.stats.costmodel import CostModel
from opskew.render import verdict as render_verdict

torch = pytest.importorskip("torch")


def _lstm_step(model, x, opt):
    out, _ = model(x)
    out.sum().backward()
    opt.step()
    opt.zero_grad()


def _transformer_step(model, x, opt):
    with torch.profiler.record_function("forward"):
        y = model(x)
    y.mean().backward()
    opt.step()
    opt.zero_grad()


def _models():
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(8, 16, num_layers=2)
    tfm = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(16, 2, dim_feedforward=32), num_layers=1)
    return {"lstm": (lstm, torch.randn(5, 2, 8), _lstm_step, {}),
            "transformer": (tfm, torch.randn(4, 2, 16), _transformer_step,
                            {"record_shapes": True, "with_stack": True})}


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    d = tmp_path_factory.mktemp("one_line")
    paths = {}
    for name, (model, x, step, kw) in _models().items():
        opt = torch.optim.AdamW(model.parameters())
        paths[name] = str(d / f"{name}.json")
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                    schedule=torch.profiler.schedule(wait=0, warmup=1, active=3, repeat=1),
                                    on_trace_ready=lambda p, path=paths[name]: p.export_chrome_trace(path),
                                    **kw) as p:
            for _ in range(4):
                step(model, x, opt)
                p.step()
    return paths


def _table_vs_summary(table_ops, corrected_path):
    """Names whose self or total differ between the table and the summary of
    the corrected trace (exact, in ns), and the number of names compared."""
    summary = {o["name"]: o for o in tf.summarize(corrected_path)["ops"]}
    differ = []
    for name, (total, self_) in table_ops.items():
        s = summary.get(name)
        if s is None or s["total_ns"] != total or s["self_ns"] != self_:
            differ.append((name, total, self_, s and (s["total_ns"], s["self_ns"])))
    return differ, len(table_ops)


# W, delta, W_py, delta_py: one that clamps nothing much, one that clamps a lot
# (children written longer than their parents' formula), one at W = 0.
COSTS = [(300.0, 40.0, 500.0, 60.0), (2000.0, 100.0, 3000.0, 100.0), (0.0, 0.0, 0.0, 0.0)]


@pytest.mark.parametrize("name", ["lstm", "transformer"])
@pytest.mark.parametrize("cost", COSTS)
def test_correct_table_is_the_summary_of_its_trace(traces, tmp_path, name, cost):
    w, d, w_py, d_py = cost
    out = str(tmp_path / "c.json")
    r = tf.correct(traces[name], CostModel.default(w, d, w_py, d_py), out=out)
    table = {o["name"]: (o["corrected_total_ns"], o["corrected_self_ns"]) for o in r["ops"] if o["calls"]}
    differ, n = _table_vs_summary(table, out)
    assert n > 20 and differ == []
    if name == "transformer":
        assert r["stats"]["py_events"] > 0 and r["stats"]["overlaps"] > 0
    if w == 0:
        # At W = 0 nothing moves: the table is the reported one (less what an end
        # that read crossed in float64 gave: docs/outputs.md, "Read as float64").
        assert all(o["corrected_total_ns"] == o["reported_total_ns"] - o["float_ns"] for o in r["ops"])
    # Every leaf is written at its corrected duration, to the ns, and longer
    # only where an event that outlived it took more of it (stretched_ns): a
    # leaf gives back nothing (docs/correct.md). Where a leaf and an
    # annotation overlap (with_stack's __enter__ frames), the overlap is the
    # annotation's to compress: a leaf name or two can come out a little
    # shorter. (At a W that clamps most of the trace, more do.)
    if w <= 300:
        leaves = [o for o in r["ops"] if o["calls"] and o["descendants"] == 0 and o["py_descendants"] == 0
                  and not o["clamped"]]
        off = []
        for o in leaves:
            # (float_ns: what an end moved earlier for float64 readers took; docs/outputs.md)
            expect = (o["reported_total_ns"] - (d_py if o["python"] else d) * o["calls"] + o["stretched_ns"]
                      - o["float_ns"])
            if abs(o["corrected_total_ns"] - expect) > 0.5 * o["calls"] + 1e-6:
                off.append((o["name"], o["corrected_total_ns"], expect))
        assert len(leaves) > 10 and len(off) <= max(1, len(leaves) // 20), off
        assert all(abs(got - want) <= 0.05 * want for _, got, want in off), off


def _mlp_step(model, x, opt):
    model(x).pow(2).mean().backward()
    opt.step()
    opt.zero_grad()


@pytest.fixture
def one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.mark.parametrize("options", [{}, {"record_shapes": True, "with_stack": True}],
                         ids=["minimal", "shapes+stack"])
def test_profile_report_rows_and_steps_are_its_corrected_traces(tmp_path, options, one_thread):
    """opskew.profile on small models: each cycle's report rows (corrected
    self and total, the median) against `opskew summary` of that cycle's
    corrected trace, to the ns; and, under the minimal profiler, the run's
    corrected step (prof.final, from the pairs) against the median
    ProfilerStep#N of the corrected traces (recorrected at stop() with the
    run's W). Same process, so the machine's noise is shared; the two medians
    are over the same active steps, the report's of the step's clock and the
    trace's of the ranges, so they differ by the steps' noise only
    (docs/profile-validation.md has the quiet figures). A step written 20-30%
    off the report, as before the fit, fails here. (Under with_stack the
    steps of these small models vary several-fold from one to the next on
    this machine: no ratio of medians over 15 steps means anything there.)"""
    import json

    import opskew

    torch.manual_seed(0)
    models = [(_models()["transformer"][:3]),
              (torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 32)),
               torch.randn(16, 32), _mlp_step)]
    for k, (model, x, step) in enumerate(models):
        opt = torch.optim.AdamW(model.parameters())
        sched = torch.profiler.schedule(wait=6, warmup=1, active=5, repeat=3)
        d = tmp_path / str(k)
        with opskew.profile(activities=[torch.profiler.ProfilerActivity.CPU], schedule=sched, report_file=None,
                            corrected_dir=str(d), **options) as p:
            for _ in range(48):
                step(model, x, opt)
                p.step()
        checked, steps = 0, []
        for rep in p.reports:
            path = rep.get("corrected_trace")
            if not path:
                continue
            with open(path) as f:
                doc = json.load(f)
            steps += [e["dur"] * 1e3 for e in doc["traceEvents"]
                      if e.get("ph") == "X" and e.get("name", "").startswith("ProfilerStep#")]
            # Each class's price, and what is not separable, in the report and the trace.
            classes = rep["cost_classes"]
            assert doc["opskew"]["run"]["cost_classes"] == classes
            # One answer: the trace's metadata carries no corrected step of its
            # own (its ranges are it), only the pairs' figure beside it.
            run = doc["opskew"]["run"]
            assert "corrected_step_ns" not in run and run["corrected_step_pairs_ns"] is not None
            assert "user_annotation" in classes["not_separable"] and "cpu_op" not in classes["not_separable"]
            assert ("python_function" in classes) == bool(options.get("with_stack"))
            assert ("per_operator_extras" in classes["not_separable"]) == bool(options.get("record_shapes"))
            if not rep.get("operators"):
                continue
            table = {o["name"]: (o["corrected_total_ns"]["median"], o["corrected_self_ns"]["median"])
                     for o in rep["operators"]["ops"]}
            differ, n = _table_vs_summary(table, path)
            assert n > 5 and differ == []
            checked += 1
        assert checked >= 1
        if options:
            continue
        final = p.final
        assert final is not None and final["corrected_step_ns"] and len(steps) >= 10
        ratio = sorted(steps)[len(steps) // 2] / final["corrected_step_ns"]
        assert 0.85 < ratio < 1.15, (k, ratio, final["corrected_step_ns"], sorted(steps))


def test_a_name_that_is_not_utf8_reads_the_same_in_the_table_and_the_trace(tmp_path):
    """The table's name of an event whose name is not UTF-8 is the one the
    corrected trace writes (U+FFFD for the bad byte), so the two agree by
    name too (it raised UnicodeDecodeError)."""
    src, out = tmp_path / "t.json", tmp_path / "c.json"
    src.write_bytes(b'{"traceEvents":[\n'
                    b'{"ph":"X","cat":"cpu_op","name":"P","pid":1,"tid":1,"ts":0,"dur":10},\n'
                    b'{"ph":"X","cat":"cpu_op","name":"bad\xa6name","pid":1,"tid":1,"ts":2,"dur":3}]}\n')
    r = tf.correct(str(src), CostModel.default(100.0, 10.0), out=str(out))
    table = {o["name"]: (o["corrected_total_ns"], o["corrected_self_ns"]) for o in r["ops"]}
    assert "bad\ufffdname" in table
    differ, n = _table_vs_summary(table, str(out))
    assert n == 2 and differ == []


@pytest.mark.parametrize("name", ["lstm", "transformer"])
@pytest.mark.parametrize("cost", COSTS[:2])
def test_rows_add_up_with_own_deltas_above_w(traces, name, cost):
    """Numbers that add up (docs/correct.md, "Rows that add up"), on real
    traces under own deltas far above W (the leaf reference can measure
    one 16x W): no row's corrected self or total (median) exceeds what it
    reported beyond its stretch, the time an own delta takes out of a leaf
    comes out of every ancestor (their added_ns.scaled), and a row whose
    corrected total is not its total less added is marked, with the clamp
    and the fit that moved it."""
    w, d, w_py, d_py = cost
    plain = tf.summarize(traces[name])["ops"]
    leaves = sorted((o for o in plain if o["cat"] == "cpu_op" and o["self_ns"] == o["total_ns"] and o["calls"] >= 5),
                    key=lambda o: -o["calls"])[:3]
    assert len(leaves) == 3
    own = {o["name"]: {"median": 8 * w, "ci95": [6 * w, 10 * w]} for o in leaves}
    wv, wpy = {"median": w, "ci95": [0.8 * w, 1.2 * w]}, {"median": w_py, "ci95": [0.8 * w_py, 1.2 * w_py]}
    v = verdict.per_operator(traces[name], CostModel.default(wv, d, wpy, d_py), op_deltas=own)
    # Operators and record_function ranges. (A with_stack Python frame that
    # a range outlives, `profiler.py(918): __enter__`, came out with its
    # self above what it reported in 1 CI run of about 40 under load: an
    # improper overlap, left as reported, that this check does not cover
    # yet; docs/correct.md, "Rows that add up".)
    above = [(r["name"], fig, r["calls"], r[f"reported_{fig}_ns"], r[f"corrected_{fig}_ns"]["median"], r["stretched_ns"],
              r["clamped"], r["moved_ns"]) for r in v["ops"] for fig in ("self", "total")
             if not r["python"]
             and r[f"corrected_{fig}_ns"]["median"] > r[f"reported_{fig}_ns"] + r["calls"] + r["stretched_ns"]]
    assert above == []
    scaled = sum(r["added_ns"]["scaled"] for r in v["ops"])
    assert scaled > 0  # the leaves' excess over W, in their ancestors
    for r in v["ops"]:
        m = r["moved_ns"]
        off = r["corrected_total_ns"]["median"] - (r["reported_total_ns"] - sum(r["added_ns"].values()))
        assert m["total"] == pytest.approx(off, abs=1e-6) and m["clamp"] + m["fit"] == pytest.approx(off, abs=1e-6)
        assert m["shown"] == (abs(off) > max(2.0 * r["calls"], 0.005 * r["reported_total_ns"]))
        if r["clamped"] == 0:
            assert m["clamp"] == 0
    out = io.StringIO()
    render_verdict.render(v, out, top=0)
    text = out.getvalue()
    shown = sum(1 for r in v["ops"] if r["moved_ns"]["shown"])
    assert text.count("\u2021") == shown + (1 if shown else 0)
    if shown:
        assert f"\u2021 {shown} row" in text
